//! Running the real `git` CLI: one command at a time, in a directory, with its
//! output captured and its failure turned into a clear `failed` error.
//!
//! Commands run with `LC_ALL=C` (parseable messages) and no terminal prompt. On
//! an SSH host they run through the host's control connection, the same way; a
//! host that cannot be reached is `unavailable`, not `failed`.
//!
//! A local git does not die with the app: it runs in its own process group (a
//! Ctrl-C meant for the app does not reach it) and writes its output to
//! in-memory files, not pipes (a pipe whose reader died would kill it with
//! SIGPIPE mid-merge). An app that dies while git writes leaves git to finish;
//! the next start finds the result (see [`crate::intents`]). Nor is it killed
//! when the request that started it is dropped (a deadline, the app's stop): a
//! git killed mid-write leaves its locks (`index.lock`, `packed-refs.lock`)
//! behind, and every later git command in the repository fails until someone
//! removes them by hand. A lock that a killed git (an agent's, say) left
//! behind anyway is removed when it makes one of the app's commands fail, and
//! the command is run again (see [`stale_lock`]).

mod stale_lock;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use krad_bus::protocol::{ApiError, ErrorCode};

use crate::hosts::Host;
use crate::profile::shell_quote;

/// Why a git command failed.
#[derive(Debug, Clone)]
pub struct GitError {
    /// The command, for the message.
    pub command: String,
    /// What git said on stderr (or why it could not run).
    pub stderr: String,
    /// Its exit code, when it ran.
    pub code: Option<i32>,
    /// True when the host could not be reached (not git's failure).
    pub unreachable: bool,
}

impl From<GitError> for ApiError {
    fn from(e: GitError) -> ApiError {
        if e.unreachable {
            // The host's link says why (`cannot reach host …`); which git
            // command would have run there tells nothing more.
            return ApiError::new(ErrorCode::Unavailable, e.stderr.trim());
        }
        ApiError::new(
            ErrorCode::Failed,
            format!("`{}` failed: {}", e.command, e.stderr.trim()),
        )
    }
}

impl std::fmt::Display for GitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` failed: {}", self.command, self.stderr.trim())
    }
}

/// Where a local git writes stdout or stderr: an in-memory file (see the
/// module's doc), read once git has exited.
struct OutputFile(std::fs::File);

impl OutputFile {
    fn new() -> std::io::Result<OutputFile> {
        use nix::sys::memfd::{MFdFlags, memfd_create};
        let fd = memfd_create(c"krad-git", MFdFlags::MFD_CLOEXEC).map_err(std::io::Error::from)?;
        Ok(OutputFile(std::fs::File::from(fd)))
    }

    fn for_child(&self) -> std::io::Result<Stdio> {
        Ok(Stdio::from(self.0.try_clone()?))
    }

    fn read(mut self) -> std::io::Result<Vec<u8>> {
        use std::io::{Read, Seek, SeekFrom};
        self.0.seek(SeekFrom::Start(0))?;
        let mut bytes = Vec::new();
        self.0.read_to_end(&mut bytes)?;
        Ok(bytes)
    }
}

/// git, in one directory, here or on a host.
#[derive(Clone)]
pub(crate) struct Git {
    dir: PathBuf,
    env: Vec<(String, String)>,
    host: Option<Arc<Host>>,
}

impl Git {
    /// git run in `dir` on this machine.
    pub(crate) fn new(dir: &Path) -> Git {
        Git {
            dir: dir.to_path_buf(),
            env: Vec::new(),
            host: None,
        }
    }

    /// git run in `dir`, on `host` when there is one.
    pub(crate) fn on(host: Option<&Arc<Host>>, dir: &Path) -> Git {
        Git {
            host: host.cloned(),
            ..Git::new(dir)
        }
    }

    /// The same, with an extra environment variable (e.g. `GIT_INDEX_FILE`).
    pub(crate) fn with_env(mut self, key: &str, value: impl AsRef<OsStr>) -> Git {
        self.env.push((
            key.to_owned(),
            value.as_ref().to_string_lossy().into_owned(),
        ));
        self
    }

    /// Removes a file (on its host), ignoring errors.
    pub(crate) async fn remove_file(&self, path: &Path) {
        match &self.host {
            None => {
                let _ = std::fs::remove_file(path);
            }
            Some(host) => {
                let script = format!("rm -f {}", shell_quote(&path.display().to_string()));
                let _ = host.run(&script, None).await;
            }
        }
    }

    /// Copies the most recently modified of `candidates` that exists (the first
    /// on a tie) to `to` (on its host), keeping its modification time; false
    /// when none could be copied.
    pub(crate) async fn copy_newest(&self, candidates: &[&Path], to: &Path) -> bool {
        match &self.host {
            None => {
                let newest = candidates
                    .iter()
                    .filter_map(|c| Some((*c, std::fs::metadata(c).ok()?.modified().ok()?)))
                    .reduce(|best, c| if c.1 > best.1 { c } else { best });
                let Some((from, modified)) = newest else {
                    return false;
                };
                std::fs::copy(from, to).is_ok()
                    && std::fs::File::options()
                        .write(true)
                        .open(to)
                        .and_then(|f| f.set_modified(modified))
                        .is_ok()
            }
            Some(host) => {
                let quote = |p: &Path| shell_quote(&p.display().to_string());
                let mut script = String::from("set -e; f=");
                let mut rest = candidates.iter();
                let Some(first) = rest.next() else {
                    return false;
                };
                script.push_str(&quote(first));
                for c in rest {
                    let c = quote(c);
                    script.push_str(&format!(
                        "; if [ -e {c} ] && {{ [ ! -e \"$f\" ] || [ {c} -nt \"$f\" ]; }}; then f={c}; fi"
                    ));
                }
                script.push_str(&format!("; cp -p \"$f\" {}", quote(to)));
                matches!(host.run(&script, None).await, Ok((Some(0), _, _)))
            }
        }
    }

    /// Renames a file (on its host), replacing `to`; false when it could not.
    pub(crate) async fn rename_file(&self, from: &Path, to: &Path) -> bool {
        match &self.host {
            None => std::fs::rename(from, to).is_ok(),
            Some(host) => {
                let script = format!(
                    "mv -f {} {}",
                    shell_quote(&from.display().to_string()),
                    shell_quote(&to.display().to_string())
                );
                matches!(host.run(&script, None).await, Ok((Some(0), _, _)))
            }
        }
    }

    /// The directory git runs in.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The host, when git runs on one.
    pub(crate) fn host(&self) -> Option<&Arc<Host>> {
        self.host.as_ref()
    }

    /// Whether the directory exists (on its host).
    pub(crate) async fn dir_exists(&self) -> bool {
        match &self.host {
            None => self.dir.is_dir(),
            Some(host) => {
                let script = format!("test -d {}", shell_quote(&self.dir.display().to_string()));
                matches!(host.run(&script, None).await, Ok((Some(0), _, _)))
            }
        }
    }

    /// Runs git; its stdout, or the error.
    pub(crate) async fn bytes<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<Vec<u8>, GitError> {
        let (code, stdout, stderr) = self.output(args, None).await?;
        if code == Some(0) {
            Ok(stdout)
        } else {
            Err(self.error(args, String::from_utf8_lossy(&stderr).into_owned(), code))
        }
    }

    /// Runs git; its stdout as text with the final newline trimmed.
    pub(crate) async fn text<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String, GitError> {
        let out = self.bytes(args).await?;
        Ok(String::from_utf8_lossy(&out)
            .trim_end_matches('\n')
            .to_owned())
    }

    /// Runs git and says whether it exited 0 (for questions like `show-ref --verify`).
    pub(crate) async fn succeeds<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<bool, GitError> {
        let (code, _, _) = self.output(args, None).await?;
        Ok(code == Some(0))
    }

    /// Runs git and returns its exit code, stdout and stderr whatever they are.
    pub(crate) async fn output<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        stdin: Option<&[u8]>,
    ) -> Result<(Option<i32>, Vec<u8>, Vec<u8>), GitError> {
        if let Some(host) = &self.host {
            let mut script = format!(
                "cd {} && env LC_ALL=C GIT_TERMINAL_PROMPT=0",
                shell_quote(&self.dir.display().to_string())
            );
            for (k, v) in &self.env {
                script.push_str(&format!(" {k}={}", shell_quote(v)));
            }
            script.push_str(" git");
            for arg in args {
                script.push(' ');
                script.push_str(&shell_quote(&arg.as_ref().to_string_lossy()));
            }
            return host.run(&script, stdin).await.map_err(|e| {
                let mut error = self.error(args, e.message, None);
                error.unreachable = true;
                error
            });
        }
        let (code, stdout, stderr) = self.run_local(args, stdin).await?;
        if code == Some(0) {
            return Ok((code, stdout, stderr));
        }
        let locks = stale_lock::named_locks(&String::from_utf8_lossy(&stderr));
        if locks.is_empty() {
            return Ok((code, stdout, stderr));
        }
        let git_dirs = self.git_dirs().await;
        match stale_lock::clear(locks, git_dirs).await {
            stale_lock::Verdict::NoLock => Ok((code, stdout, stderr)),
            stale_lock::Verdict::Cleared => self.run_local(args, stdin).await,
            stale_lock::Verdict::Kept(why) => {
                let mut stderr = stderr;
                stderr.extend_from_slice(format!("\n({why})").as_bytes());
                Ok((code, stdout, stderr))
            }
        }
    }

    /// The repository's git directory and common directory, absolute (none
    /// when git cannot say).
    async fn git_dirs(&self) -> Vec<PathBuf> {
        let args = [
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
            "--git-common-dir",
        ];
        match self.run_local(&args, None).await {
            Ok((Some(0), out, _)) => (String::from_utf8_lossy(&out).lines())
                .map(PathBuf::from)
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Runs git on this machine (see the module's doc).
    async fn run_local<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        stdin: Option<&[u8]>,
    ) -> Result<(Option<i32>, Vec<u8>, Vec<u8>), GitError> {
        use tokio::io::AsyncWriteExt;
        let cannot_run = |e: std::io::Error| self.error(args, format!("cannot run git: {e}"), None);
        let stdout = OutputFile::new().map_err(cannot_run)?;
        let stderr = OutputFile::new().map_err(cannot_run)?;
        let mut command = tokio::process::Command::new("git");
        command
            .args(args)
            .current_dir(&self.dir)
            .env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(stdout.for_child().map_err(cannot_run)?)
            .stderr(stderr.for_child().map_err(cannot_run)?)
            .process_group(0);
        for (k, v) in &self.env {
            command.env(k, v);
        }
        let mut child = command.spawn().map_err(cannot_run)?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            let _ = pipe.write_all(input).await;
        }
        let status = child
            .wait()
            .await
            .map_err(|e| self.error(args, format!("git did not finish: {e}"), None))?;
        let not_read =
            |e: std::io::Error| self.error(args, format!("cannot read git's output: {e}"), None);
        Ok((
            status.code(),
            stdout.read().map_err(not_read)?,
            stderr.read().map_err(not_read)?,
        ))
    }

    fn error<S: AsRef<OsStr>>(&self, args: &[S], stderr: String, code: Option<i32>) -> GitError {
        let words: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        let place = match &self.host {
            Some(host) => format!(" (on host {})", host.name),
            None => String::new(),
        };
        GitError {
            command: format!("git {}{place}", words.join(" ")),
            stderr,
            code,
            unreachable: false,
        }
    }

    /// `-c user.name=… -c user.email=…` when the repository has no identity, so
    /// that the commits krad makes (archives, squashes) never fail on it.
    pub(crate) async fn identity_args(&self) -> Vec<String> {
        let has = |key: &'static str| async move {
            self.text(&["config", key])
                .await
                .is_ok_and(|v| !v.is_empty())
        };
        if has("user.name").await && has("user.email").await {
            Vec::new()
        } else {
            vec![
                "-c".into(),
                "user.name=krad".into(),
                "-c".into(),
                "user.email=krad@localhost".into(),
            ]
        }
    }

    /// The commit a ref or revision names, or `None`.
    pub(crate) async fn commit_of(&self, rev: &str) -> Result<Option<String>, GitError> {
        let spec = format!("{rev}^{{commit}}");
        let (code, out, _) = self
            .output(&["rev-parse", "--verify", "--quiet", spec.as_str()], None)
            .await?;
        Ok((code == Some(0)).then(|| String::from_utf8_lossy(&out).trim().to_owned()))
    }

    /// The files `git status` reports as changed (tracked changes and, when
    /// asked, untracked files).
    pub(crate) async fn dirty_files(&self, untracked: bool) -> Result<Vec<String>, GitError> {
        let mode = if untracked {
            "--untracked-files=all"
        } else {
            "--untracked-files=no"
        };
        let out = self
            .bytes(&["status", "--porcelain=v1", "-z", mode])
            .await?;
        let mut files = Vec::new();
        let mut entries = out.split(|&b| b == 0).filter(|e| !e.is_empty());
        while let Some(entry) = entries.next() {
            if entry.len() < 4 {
                continue;
            }
            files.push(String::from_utf8_lossy(&entry[3..]).into_owned());
            // A rename carries its old path as the next entry.
            if matches!(entry[0], b'R' | b'C') {
                entries.next();
            }
        }
        Ok(files)
    }
}
