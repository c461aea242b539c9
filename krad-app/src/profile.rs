//! Profiles: how to start a kind of agent, how its prompt reaches it and how it
//! reports its state. Built in: `shell`, `exec`, `claude`, `codex`; the config
//! file adds more or changes these.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::config::{ActionConfig, Config, HookKind, ProfileConfig, PromptDelivery};

/// Ctrl-C: interrupts a shell's program.
const CTRL_C: &str = "\u{3}";
/// Escape: interrupts Claude Code's and Codex's turn.
const ESCAPE: &str = "\u{1b}";

/// In a profile's `resume` arguments: the agent's session id.
pub(crate) const SESSION: &str = "{session}";

fn resumable(mut profile: Profile, args: &[&str]) -> Profile {
    profile.resume = args.iter().map(|a| (*a).to_owned()).collect();
    profile
}

/// The argv that resumes `session` with `profile` (`None`: it cannot resume).
pub(crate) fn resume_command(profile: &Profile, session: &str) -> Option<Vec<String>> {
    if profile.resume.is_empty() || profile.command.is_empty() {
        return None;
    }
    let mut command = profile.command.clone();
    command.extend(profile.resume.iter().map(|a| a.replace(SESSION, session)));
    Some(command)
}

fn action(id: &str, label: &str, keys: &str) -> ActionConfig {
    ActionConfig {
        id: id.to_owned(),
        label: label.to_owned(),
        keys: keys.to_owned(),
    }
}

/// A resolved profile.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Profile {
    /// Its name.
    pub name: String,
    /// The argv (empty for `exec`: Spawn must give `command`).
    pub command: Vec<String>,
    /// How the prompt reaches the program.
    pub prompt: PromptDelivery,
    /// How the program reports its state.
    pub hooks: HookKind,
    /// No output this long while working: shown idle (`state_source: "quiet"`).
    pub idle_after: Option<Duration>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// Also set `KRAD_ADE_TOKEN`.
    pub expose_token: bool,
    /// The keys that interrupt a turn.
    pub interrupt: String,
    /// The belt buttons.
    pub actions: Vec<ActionConfig>,
    /// The arguments that resume a session (`{session}` replaced); empty: cannot.
    pub resume: Vec<String>,
    /// Its terminals' memory limit (cgroup v2), over `[limits] memory_max_mib`.
    pub memory_max_mib: Option<u64>,
    /// Its agents always run contained (`[sandbox] profiles` names it).
    pub contained: bool,
}

impl Profile {
    /// Whether a terminal of this profile runs contained: the config says so
    /// for the profile, or its Spawn asks (which can only tighten).
    pub(crate) fn contained_for(&self, asked: Option<bool>) -> bool {
        asked == Some(true) || self.contained
    }
}

/// Every profile the app knows, and the default one.
#[derive(Debug, Clone)]
pub(crate) struct Profiles {
    profiles: BTreeMap<String, Arc<Profile>>,
    default: String,
}

impl Profiles {
    /// The built-in profiles with the config's changes and additions.
    pub(crate) fn from_config(config: &Config) -> Result<Profiles, String> {
        let mut profiles: BTreeMap<String, Profile> = builtins()
            .into_iter()
            .map(|p| (p.name.clone(), p))
            .collect();
        for (name, change) in &config.profiles {
            let profile = match profiles.remove(name) {
                Some(base) => apply(base, change),
                None => {
                    let Some(command) = change.command.clone() else {
                        return Err(format!("profile {name:?} needs a command"));
                    };
                    let plain = plain(name, command, PromptDelivery::Arg, HookKind::None, None);
                    apply(plain, change)
                }
            };
            profiles.insert(name.clone(), profile);
        }
        for name in &config.sandbox.profiles {
            if let Some(profile) = profiles.get_mut(name) {
                profile.contained = true;
            }
        }
        let default = config
            .default_profile
            .clone()
            .unwrap_or_else(|| "shell".to_owned());
        if !profiles.contains_key(&default) {
            return Err(format!("default_profile {default:?} is not a profile"));
        }
        Ok(Profiles {
            profiles: profiles
                .into_iter()
                .map(|(k, v)| (k, Arc::new(v)))
                .collect(),
            default,
        })
    }

    /// A profile by name.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<Profile>> {
        self.profiles.get(name).cloned()
    }

    /// The profile Spawn uses when it names none.
    pub(crate) fn default_name(&self) -> &str {
        &self.default
    }

    /// The names, for error messages.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.profiles.keys().map(String::as_str).collect()
    }
}

fn apply(mut profile: Profile, change: &ProfileConfig) -> Profile {
    if let Some(command) = &change.command {
        profile.command = command.clone();
    }
    if let Some(prompt) = change.prompt {
        profile.prompt = prompt;
    }
    if let Some(hooks) = change.hooks {
        profile.hooks = hooks;
    }
    if let Some(secs) = change.idle_after_secs {
        profile.idle_after = (secs > 0).then(|| Duration::from_secs(secs));
    }
    if let Some(env) = &change.env {
        profile.env.extend(env.clone());
    }
    if let Some(expose) = change.expose_token {
        profile.expose_token = expose;
    }
    if let Some(interrupt) = &change.interrupt {
        profile.interrupt = interrupt.clone();
    }
    if let Some(actions) = &change.actions {
        profile.actions = actions.clone();
    }
    if let Some(resume) = &change.resume {
        profile.resume = resume.clone();
    }
    if change.memory_max_mib.is_some() {
        profile.memory_max_mib = change.memory_max_mib;
    }
    profile
}

/// A profile of `command` with nothing more: no environment of its own, no
/// actions, Ctrl-C to interrupt; quiet after `idle` seconds when given.
fn plain(
    name: &str,
    command: Vec<String>,
    prompt: PromptDelivery,
    hooks: HookKind,
    idle: Option<u64>,
) -> Profile {
    Profile {
        name: name.to_owned(),
        command,
        prompt,
        hooks,
        idle_after: idle.map(Duration::from_secs),
        env: BTreeMap::new(),
        expose_token: false,
        interrupt: CTRL_C.to_owned(),
        actions: Vec::new(),
        resume: Vec::new(),
        memory_max_mib: None,
        contained: false,
    }
}

fn builtins() -> Vec<Profile> {
    let shell = std::env::var("SHELL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/sh".to_owned());
    let agent = |mut profile: Profile| {
        profile.interrupt = ESCAPE.to_owned();
        profile.actions = vec![
            action("interrupt", "Interrupt", ESCAPE),
            action("continue", "Continue", "continue\r"),
        ];
        profile
    };
    let with_keys = |mut profile: Profile| {
        profile.actions = vec![
            action("interrupt", "Ctrl-C", CTRL_C),
            action("enter", "Enter", "\r"),
        ];
        profile
    };
    vec![
        with_keys(plain(
            "shell",
            vec![shell],
            PromptDelivery::Type,
            HookKind::None,
            Some(3),
        )),
        with_keys(plain(
            "exec",
            Vec::new(),
            PromptDelivery::Arg,
            HookKind::None,
            None,
        )),
        resumable(
            agent(plain(
                "claude",
                vec!["claude".into()],
                // Typed once its SessionStart hook said it is up: as an argument,
                // a prompt like `update` or `-v` would run a subcommand or flag.
                PromptDelivery::Type,
                HookKind::Claude,
                Some(90),
            )),
            &["--resume", SESSION],
        ),
        resumable(
            agent(plain(
                "codex",
                vec!["codex".into()],
                PromptDelivery::Arg,
                HookKind::Codex,
                Some(90),
            )),
            &["resume", SESSION],
        ),
    ]
}

/// The argv a spawn runs: the command, the hook settings injected right after the
/// program, and the prompt as last argument when the profile says so.
pub(crate) fn argv(
    profile: &Profile,
    command: Vec<String>,
    prompt: Option<&str>,
    krad: &Path,
    claude_settings: Option<&Path>,
) -> Vec<String> {
    let mut argv = command;
    let mut injected: Vec<String> = match profile.hooks {
        HookKind::Claude => match claude_settings {
            Some(path) => vec!["--settings".into(), path.display().to_string()],
            None => Vec::new(),
        },
        HookKind::Codex => codex_hooks(krad),
        HookKind::None => Vec::new(),
    };
    if !argv.is_empty() {
        let rest = argv.split_off(1);
        argv.append(&mut injected);
        argv.extend(rest);
    }
    argv.extend(prompt_args(profile, prompt));
    argv
}

/// The arguments that carry the prompt, when the profile passes it as one.
/// Codex parses a first argument like `review` or `--version` as its own; after
/// `--` it is the prompt, whatever it says.
pub(crate) fn prompt_args(profile: &Profile, prompt: Option<&str>) -> Vec<String> {
    match prompt {
        Some(prompt) if matches!(profile.prompt, PromptDelivery::Arg) => {
            let mut args = Vec::with_capacity(2);
            if matches!(profile.hooks, HookKind::Codex) {
                args.push("--".to_owned());
            }
            args.push(prompt.to_owned());
            args
        }
        _ => Vec::new(),
    }
}

/// What the `codex` profile gives Codex, as `-c` overrides (so for this spawn
/// only; the user's own config is never read nor written):
/// * `notify=["<krad>","hook","codex"]`: Codex runs it after each turn with a
///   JSON description of the turn as the last argument;
/// * a `PermissionRequest` hook calling `krad hook codex`, which raises the
///   approval as an Ask on the bus and prints the decision;
/// * the trust for that hook: Codex runs a hook only once its hash was trusted
///   (`hooks.state.<key>.trusted_hash`), and a session's own overrides may
///   trust the hooks they bring ([`codex_hook_trust`]);
/// * `allow_login_shell=false`: its shell commands run in a plain shell, not a
///   login shell, whose `/etc/profile` would set `PATH` anew and drop the
///   directory the app puts first for `krad` (a lead's first `krad` call
///   would find no `krad`).
fn codex_hooks(krad: &Path) -> Vec<String> {
    let program = serde_json::to_string(&krad.display().to_string()).unwrap_or_default();
    let command = codex_hook_command(krad);
    let quoted = serde_json::to_string(&command).unwrap_or_default();
    let (key, hash) = codex_hook_trust(&command);
    vec![
        "-c".into(),
        format!("notify=[{program},\"hook\",\"codex\"]"),
        "-c".into(),
        format!(
            "hooks.PermissionRequest=[{{matcher=\"{CODEX_HOOK_MATCHER}\",hooks=[{{type=\"command\",command={quoted},timeout={CODEX_HOOK_TIMEOUT}}}]}}]"
        ),
        "-c".into(),
        format!(
            "hooks.state={{{key}={{trusted_hash=\"{hash}\"}}}}",
            key = serde_json::to_string(&key).unwrap_or_default()
        ),
        "-c".into(),
        "allow_login_shell=false".into(),
    ]
}

/// The command of the hooks the `codex` profile gives Codex.
pub(crate) fn codex_hook_command(krad: &Path) -> String {
    format!("{} hook codex", shell_quote(&krad.display().to_string()))
}

/// Every approval (`*`: commands, patches, …) goes through the hook.
const CODEX_HOOK_MATCHER: &str = "*";
/// How long Codex lets the hook wait for a decision (seconds), as Claude Code.
const CODEX_HOOK_TIMEOUT: u64 = 600;

/// The key and hash that trust the `PermissionRequest` hook with `command`, as
/// Codex (0.171) computes them: the key names the hook's place (the session's
/// own overrides, `/<session-flags>/config.toml`, its event, its matcher group
/// and handler), the hash is `sha256:` and the hex SHA-256 of the hook's
/// normalized identity as JSON with sorted keys. Checked against the real
/// Codex (`hooks/list` of its app-server, and the real tests: a hook that is
/// not trusted never raises an ask).
pub(crate) fn codex_hook_trust(command: &str) -> (String, String) {
    let key = "/<session-flags>/config.toml:permission_request:0:0".to_owned();
    // serde_json's maps are sorted: this is the canonical form.
    let identity = json!({
        "event_name": "permission_request",
        "matcher": CODEX_HOOK_MATCHER,
        "hooks": [{
            "type": "command",
            "command": command,
            "timeout": CODEX_HOOK_TIMEOUT,
            "async": false,
        }],
    });
    let digest = Sha256::digest(identity.to_string().as_bytes());
    (key, format!("sha256:{}", hex::encode(digest)))
}

/// The settings file given to Claude Code with `--settings`: hooks that call
/// `krad hook claude` (which reads the event from stdin and reports it).
/// The user's own settings are never touched; Claude Code merges this file in.
pub(crate) fn claude_settings(krad: &Path) -> serde_json::Value {
    let command = format!("{} hook claude", shell_quote(&krad.display().to_string()));
    let hook = json!([{ "hooks": [{ "type": "command", "command": command, "timeout": 30 }] }]);
    let matched = |matcher: &str| json!([{ "matcher": matcher, "hooks": [{ "type": "command", "command": command, "timeout": 30 }] }]);
    json!({
        "hooks": {
            "SessionStart": hook,
            "UserPromptSubmit": hook,
            "PreToolUse": matched("*"),
            "PostToolUse": matched("*"),
            "Stop": hook,
            "StopFailure": hook,
            "Notification": matched("permission_prompt|idle_prompt"),
            // Permission requests go to an Ask on the bus; the hook waits for the
            // decision (up to its expiry, then Claude Code asks in its own TUI).
            "PermissionRequest": [{ "matcher": "*", "hooks": [{ "type": "command", "command": command, "timeout": 600 }] }],
        }
    })
}

/// Quotes a word for `sh`.
pub(crate) fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:=,@".contains(&b))
    {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_and_overrides() {
        let config = Config::parse(
            "default_profile = \"mine\"\n[profiles.claude]\nidle_after_secs = 5\n[profiles.mine]\ncommand = [\"my-agent\"]\n",
        )
        .unwrap();
        let profiles = Profiles::from_config(&config).unwrap();
        assert_eq!(profiles.default_name(), "mine");
        let claude = profiles.get("claude").unwrap();
        assert_eq!(claude.command, vec!["claude"]);
        assert_eq!(claude.idle_after, Some(Duration::from_secs(5)));
        assert_eq!(profiles.get("mine").unwrap().prompt, PromptDelivery::Arg);
        for name in ["shell", "exec", "codex"] {
            assert!(profiles.get(name).is_some());
        }
    }

    #[test]
    fn a_new_profile_needs_a_command_and_the_default_must_exist() {
        let config = Config::parse("[profiles.x]\nprompt = \"type\"\n").unwrap();
        assert!(Profiles::from_config(&config).is_err());
        let config = Config::parse("default_profile = \"nope\"\n").unwrap();
        assert!(Profiles::from_config(&config).is_err());
    }

    #[test]
    fn hooks_are_injected_after_the_program_and_the_prompt_goes_last() {
        let profiles = Profiles::from_config(&Config::default()).unwrap();
        let claude = profiles.get("claude").unwrap();
        let built = argv(
            &claude,
            vec!["claude".into(), "--model".into(), "opus".into()],
            Some("update"),
            Path::new("/bin/krad"),
            Some(Path::new("/s/settings.json")),
        );
        // Claude Code's prompt is typed, never an argument (`claude update` updates).
        assert_eq!(
            built,
            [
                "claude",
                "--settings",
                "/s/settings.json",
                "--model",
                "opus"
            ]
        );
        let codex = profiles.get("codex").unwrap();
        let built = argv(
            &codex,
            vec!["codex".into()],
            Some("go"),
            Path::new("/bin/krad"),
            None,
        );
        assert_eq!(
            built[..3],
            ["codex", "-c", "notify=[\"/bin/krad\",\"hook\",\"codex\"]"]
        );
        assert_eq!(
            built[3..5],
            [
                "-c",
                "hooks.PermissionRequest=[{matcher=\"*\",hooks=[{type=\"command\",command=\"/bin/krad hook codex\",timeout=600}]}]"
            ]
        );
        assert_eq!(built[5], "-c");
        assert!(built[6].starts_with("hooks.state={\"/<session-flags>/config.toml:permission_request:0:0\"={trusted_hash=\"sha256:"));
        assert_eq!(built[7..9], ["-c", "allow_login_shell=false"]);
        assert_eq!(built[9..], ["--", "go"]);
    }

    #[test]
    fn the_codex_hook_is_trusted_as_codex_computes_it() {
        // The hash Codex 0.171.0's app-server gave for this hook (`hooks/list`,
        // `currentHash`): tests/suite/real/FINDINGS.md.
        let (key, hash) = codex_hook_trust("/bin/krad hook codex");
        assert_eq!(key, "/<session-flags>/config.toml:permission_request:0:0");
        assert_eq!(
            hash,
            "sha256:0c3bfe5d8efb4c14ddae8af32fc6fd9f07aed9d48dd3bb7a2943b8442510bec6"
        );
        assert_eq!(
            codex_hook_command(Path::new("/a b/krad")),
            "'/a b/krad' hook codex"
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/usr/bin/krad"), "/usr/bin/krad");
        assert_eq!(shell_quote("/a b/it's"), "'/a b/it'\\''s'");
    }
}
