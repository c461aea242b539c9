//! `krad doctor`'s checks of this machine, made without the app: the agent
//! CLIs on PATH and their versions against the tested ones (the pins of
//! `scripts/agent-clis.sh`, embedded), tmux, bubblewrap, ssh, cgroup v2
//! delegation, the page's embedded assets, git and its identity, and the
//! repository's lock and discovery file. One line each, with the fix.
//!
//! Runs programs only with `--version`-like arguments and a time limit;
//! never imports the bus client.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde::Serialize;

use crate::apps::lock::{self, Probe};
use crate::apps::{discovery, registry, repository};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Level {
    /// As it should be.
    Ok,
    /// Worth knowing; nothing to do unless you want what it is about.
    Info,
    /// Something krad can use is missing or untested; it works without.
    Warn,
    /// Something krad needs is wrong: `krad doctor` exits 1.
    Problem,
}

impl Level {
    /// The line's first word, as the app's checks print theirs.
    pub(super) fn label(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Problem => "PROBLEM",
        }
    }
}

/// One finding.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Check {
    /// What was checked (`claude`, `tmux`, `lock`, …).
    pub about: &'static str,
    /// How it went.
    pub level: Level,
    /// What was found.
    pub found: String,
    /// What to do, when something is to be done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn new(about: &'static str, level: Level, found: impl Into<String>) -> Check {
        Check {
            about,
            level,
            found: found.into(),
            fix: None,
        }
    }

    fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }

    /// The line `krad doctor` prints.
    pub(super) fn line(&self) -> String {
        let mut line = format!("{:<7} {}: {}", self.level.label(), self.about, self.found);
        if let Some(fix) = &self.fix {
            line.push_str(&format!(" — fix: {fix}"));
        }
        line
    }
}

/// The tested agent CLI versions, from the one place they are pinned.
const AGENT_PINS: &str = include_str!("../../../../scripts/agent-clis.sh");

/// An agent CLI krad has profiles for.
struct AgentCli {
    program: &'static str,
    /// The npm package it comes in.
    package: &'static str,
    /// Its array of pins in `scripts/agent-clis.sh`.
    pins: &'static str,
}

const AGENT_CLIS: [AgentCli; 2] = [
    AgentCli {
        program: "claude",
        package: "@anthropic-ai/claude-code",
        pins: "CLAUDE_VERSION",
    },
    AgentCli {
        program: "codex",
        package: "@openai/codex",
        pins: "CODEX_VERSION",
    },
];

/// Every local check, for the repository of `repo` (or the current directory).
pub(super) fn checks(repo: Option<&Path>) -> Vec<Check> {
    let mut checks: Vec<Check> = AGENT_CLIS.iter().map(agent_cli).collect();
    checks.push(tmux());
    checks.push(bubblewrap());
    checks.push(ssh());
    checks.push(cgroup());
    checks.push(page_assets());
    let dir = repo
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok());
    checks.extend(git(dir.as_deref()));
    checks.extend(repository_files(dir.as_deref()));
    checks
}

/// The tested versions of an agent CLI: `latest` first, then `previous`.
fn tested_versions(pins: &str) -> Vec<String> {
    let Some(line) = AGENT_PINS
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("declare -A {pins}=(")))
    else {
        return Vec::new();
    };
    let mut versions: Vec<String> = line
        .split('[')
        .skip(1)
        .filter_map(|part| part.split_once("]=")?.1.split([' ', ')']).next())
        .map(str::to_owned)
        .collect();
    versions.dedup();
    versions
}

fn agent_cli(cli: &AgentCli) -> Check {
    let tested = tested_versions(cli.pins);
    let latest = tested.first().cloned().unwrap_or_default();
    let install = format!("npm install -g {}@{latest}", cli.package);
    let Some(path) = on_path(cli.program) else {
        return Check::new(
            cli.program,
            Level::Warn,
            format!("not on PATH; the `{}` profile needs it", cli.program),
        )
        .fix(install);
    };
    let Some(version) = version_of(&path, &["--version"]) else {
        return Check::new(
            cli.program,
            Level::Warn,
            format!("{} did not tell its version", path.display()),
        )
        .fix(install);
    };
    if tested.contains(&version) {
        Check::new(
            cli.program,
            Level::Ok,
            format!("{version} at {} (tested)", path.display()),
        )
    } else {
        Check::new(
            cli.program,
            Level::Warn,
            format!(
                "{version} at {} is not a tested version ({}); it may work, hooks and \
                 states are checked against those",
                path.display(),
                tested.join(", ")
            ),
        )
        .fix(install)
    }
}

fn tmux() -> Check {
    match on_path("tmux").and_then(|p| version_of(&p, &["-V"])) {
        Some(version) => Check::new(
            "tmux",
            Level::Ok,
            format!("tmux {version}: terminals can outlive the app ([terminals] host = \"tmux\")"),
        ),
        None => Check::new(
            "tmux",
            Level::Info,
            "not installed; needed only for [terminals] host = \"tmux\" (terminals that \
             outlive the app)",
        )
        .fix("apt-get install tmux"),
    }
}

fn bubblewrap() -> Check {
    let Some(path) = on_path("bwrap") else {
        return Check::new(
            "bubblewrap",
            Level::Info,
            "bwrap is not installed; needed only for `krad spawn --sandbox`",
        )
        .fix("apt-get install bubblewrap");
    };
    let version = version_of(&path, &["--version"]).unwrap_or_else(|| "?".to_owned());
    let works = run_for(
        &path,
        &["--dev-bind", "/", "/", "true"],
        Duration::from_secs(5),
    )
    .is_some_and(|out| out.status.success());
    if works {
        Check::new(
            "bubblewrap",
            Level::Ok,
            format!("bwrap {version}: sandboxed agents work here"),
        )
    } else {
        Check::new(
            "bubblewrap",
            Level::Warn,
            format!("bwrap {version} cannot make a sandbox here (unprivileged user namespaces?)"),
        )
        .fix("sysctl -w kernel.unprivileged_userns_clone=1 (or the distribution's AppArmor rule for bwrap)")
    }
}

fn ssh() -> Check {
    let client = on_path("ssh").and_then(|p| version_of(&p, &["-V"]));
    let server = ["/usr/sbin/sshd", "/usr/bin/sshd"]
        .iter()
        .any(|p| Path::new(p).is_file());
    let server_note = if server {
        "sshd is here too"
    } else {
        "no sshd here (the hosts need one, this machine does not)"
    };
    match client {
        Some(version) => Check::new(
            "ssh",
            Level::Ok,
            format!("OpenSSH {version}: SSH hosts ([hosts.NAME]) work; {server_note}"),
        ),
        None => Check::new(
            "ssh",
            Level::Info,
            format!("OpenSSH's client is not installed; needed only for SSH hosts; {server_note}"),
        )
        .fix("apt-get install openssh-client"),
    }
}

fn cgroup() -> Check {
    match krad_app::cgroup::here() {
        krad_app::cgroup::Delegation::Delegated(dir) => Check::new(
            "cgroup",
            Level::Ok,
            format!(
                "cgroup v2 delegated ({}): memory limits per terminal work",
                dir.display()
            ),
        ),
        krad_app::cgroup::Delegation::Unavailable(why) => Check::new(
            "cgroup",
            Level::Info,
            format!("no memory limits per terminal: {why}; needed only for memory_max_mib"),
        )
        .fix("start the app in a delegated cgroup v2 scope: systemd-run --user --scope -p Delegate=yes krad serve"),
    }
}

fn page_assets() -> Check {
    let pinned = krad_web::VENDOR_MANIFEST
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let file = fields.next()?;
            (file == "xterm.js").then(|| fields.next().zip(fields.next()))?
        })
        .next();
    match (krad_web::embedded_size("/assets/xterm.js"), pinned) {
        (Some(size), Some((package, version))) if size > 100_000 => Check::new(
            "page",
            Level::Ok,
            format!(
                "{package} {version} embedded ({} KiB, sha256-pinned)",
                size / 1024
            ),
        ),
        (size, _) => Check::new(
            "page",
            Level::Problem,
            format!(
                "xterm.js is not embedded whole ({} bytes): the page's terminals cannot work",
                size.unwrap_or(0)
            ),
        )
        .fix("rebuild krad from a clean clone (krad-web/vendor/ holds the pinned xterm.js)"),
    }
}

/// git itself, and the identity commits are made with in `dir`.
fn git(dir: Option<&Path>) -> Vec<Check> {
    let Some(git) = on_path("git") else {
        return vec![
            Check::new("git", Level::Problem, "git is not installed; krad needs it")
                .fix("apt-get install git"),
        ];
    };
    let version = version_of(&git, &["--version"]).unwrap_or_else(|| "?".to_owned());
    let config = |key: &str| {
        let mut args: Vec<String> = Vec::new();
        if let Some(dir) = dir {
            args.extend(["-C".to_owned(), dir.display().to_string()]);
        }
        args.extend(["config".to_owned(), "--get".to_owned(), key.to_owned()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_for(&git, &args, Duration::from_secs(5))
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .filter(|value| !value.is_empty())
    };
    let identity = match (config("user.name"), config("user.email")) {
        (Some(name), Some(email)) => Check::new("git identity", Level::Ok, format!("{name} <{email}>")),
        _ => Check::new(
            "git identity",
            Level::Warn,
            "user.name or user.email is not set: picking a variant (merge, squash) commits, \
             and git refuses without them",
        )
        .fix("git config --global user.name 'Your Name' && git config --global user.email you@example.com"),
    };
    vec![
        Check::new("git", Level::Ok, format!("git {version}")),
        identity,
    ]
}

/// The lock and the discovery file of the repository of `dir`, and the
/// per-user list of running apps (whose dead entries this cleans).
fn repository_files(dir: Option<&Path>) -> Vec<Check> {
    let running = registry::live().len();
    let apps = Check::new(
        "apps",
        Level::Ok,
        format!("{running} running on this machine (`krad apps`)"),
    );
    let Some(git_dir) = dir.and_then(repository::common_dir_of) else {
        return vec![
            apps,
            Check::new(
                "lock",
                Level::Info,
                "not in a git repository: nothing to check (run in one, or give --repo PATH)",
            ),
        ];
    };
    let krad_dir = repository::krad_dir(&git_dir);
    let lock_file = krad_dir.join(lock::FILE);
    let mut checks = vec![apps];
    match lock::probe(&krad_dir) {
        Probe::Held(holder) => {
            let who = holder.as_ref().map_or_else(
                || "an app".to_owned(),
                |h| {
                    format!(
                        "the app pid {} ({})",
                        h.pid,
                        h.endpoint.as_deref().unwrap_or("starting")
                    )
                },
            );
            checks.push(Check::new(
                "lock",
                Level::Ok,
                format!("{} is held by {who}", lock_file.display()),
            ));
            checks.push(discovery_file(&git_dir, holder.map(|h| h.pid)));
        }
        Probe::Free(guard) => {
            drop(guard);
            // live() removes a dead app's file; say so.
            let stale = discovery::path(&git_dir).exists();
            let _ = discovery::live(&git_dir);
            let served = dir.unwrap_or(&git_dir);
            let mut found = format!("no app serves {}", served.display());
            if stale {
                found.push_str("; removed the discovery file a dead app left");
            }
            checks.push(
                Check::new("lock", Level::Info, found)
                    .fix("krad serve, in the repository, to start its app"),
            );
        }
    }
    checks
}

/// The discovery file of a served repository: there, naming the lock's
/// holder, and private.
fn discovery_file(git_dir: &Path, holder: Option<u32>) -> Check {
    let path = discovery::path(git_dir);
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| m.permissions().mode() & 0o777)
    };
    let Ok(found) = krad_bus::api_json::read(&path) else {
        return Check::new(
            "discovery",
            Level::Info,
            format!("{} is not there yet (the app is starting?)", path.display()),
        );
    };
    if holder.is_some_and(|pid| pid != found.pid) {
        return Check::new(
            "discovery",
            Level::Warn,
            format!(
                "{} names pid {}, not the lock's holder (it is being replaced?)",
                path.display(),
                found.pid
            ),
        );
    }
    let (file, folder) = (mode(&path), path.parent().and_then(mode));
    if file != Some(0o600) || folder != Some(0o700) {
        return Check::new(
            "discovery",
            Level::Problem,
            format!(
                "{} holds a token but is not private (file {:o}, folder {:o})",
                path.display(),
                file.unwrap_or(0),
                folder.unwrap_or(0)
            ),
        )
        .fix(format!(
            "chmod 700 {} && chmod 600 {}",
            path.parent().unwrap_or(git_dir).display(),
            path.display()
        ));
    }
    Check::new(
        "discovery",
        Level::Ok,
        format!("{} names the app pid {} (0600)", path.display(), found.pid),
    )
}

/// `program`'s path on PATH, if it is there.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The version `program args` prints (on stdout or stderr): its first word
/// that starts with a digit and has a dot, as in `2.1.332 (Claude Code)`,
/// `codex-cli 0.171.0`, `tmux 3.3a`, `OpenSSH_9.2p1`.
fn version_of(program: &Path, args: &[&str]) -> Option<String> {
    let out = run_for(program, args, Duration::from_secs(10))?;
    let text = format!(
        "{} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    version_in(&text)
}

fn version_in(text: &str) -> Option<String> {
    text.split(|c: char| c.is_whitespace() || c == '_' || c == ',')
        .map(|word| word.trim_start_matches('v'))
        .find(|word| word.starts_with(|c: char| c.is_ascii_digit()) && word.contains('.'))
        .map(str::to_owned)
}

/// Runs `program` with nothing on stdin for at most `limit`; `None` if it
/// could not start or did not end in time (then it is killed).
fn run_for(program: &Path, args: &[&str], limit: Duration) -> Option<std::process::Output> {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let pid = child.id();
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match result.recv_timeout(limit) {
        Ok(output) => output.ok(),
        Err(_) => {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tested_versions_are_the_pins_of_agent_clis_sh() {
        let claude = tested_versions("CLAUDE_VERSION");
        assert_eq!(claude.len(), 2, "{claude:?}");
        assert!(
            claude
                .iter()
                .all(|v| version_in(v).as_deref() == Some(v.as_str()))
        );
        assert!(!tested_versions("CODEX_VERSION").is_empty());
        assert!(tested_versions("NO_SUCH").is_empty());
    }

    #[test]
    fn versions_are_read_from_what_each_program_prints() {
        assert_eq!(
            version_in("2.1.332 (Claude Code)\n").as_deref(),
            Some("2.1.332")
        );
        assert_eq!(
            version_in("codex-cli 0.171.0\n").as_deref(),
            Some("0.171.0")
        );
        assert_eq!(version_in("tmux 3.3a").as_deref(), Some("3.3a"));
        assert_eq!(
            version_in("OpenSSH_9.2p1 Debian-2, OpenSSL 3.0.15").as_deref(),
            Some("9.2p1")
        );
        assert_eq!(version_in("bubblewrap 0.8.0").as_deref(), Some("0.8.0"));
        assert_eq!(version_in("no version here"), None);
    }

    #[test]
    fn a_line_says_what_was_found_and_the_fix() {
        let check = Check::new("tmux", Level::Info, "not installed").fix("apt-get install tmux");
        assert_eq!(
            check.line(),
            "info    tmux: not installed — fix: apt-get install tmux"
        );
    }
}
