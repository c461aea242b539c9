//! api.json: how clients outside the app's terminals find the bus and its token.
//!
//! Written atomically (a 0600 temp file renamed over the target) into a private
//! (0700, owned by us) directory, removed when the app stops cleanly.
//!
//! Where it lives, first match wins: `$KRAD_ADE_API_JSON`,
//! `$XDG_RUNTIME_DIR/krad-ade/api.json`, `~/.krad-ade/api.json`.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::protocol::Token;

/// The environment variable that overrides where api.json lives.
pub const API_JSON_ENV: &str = "KRAD_ADE_API_JSON";

/// The contents of api.json.
///
/// # Format
///
/// ```json
/// {"api_version":1,"endpoint":"127.0.0.1:41234","token":"…","pid":48211,
///  "build":"0.1.0","started_at":"2026-11-29T17:00:00Z","root":"/path/to/repo"}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiJson {
    /// The API version the app serves.
    pub api_version: u64,
    /// `127.0.0.1:<port>`.
    pub endpoint: String,
    /// The client token.
    pub token: Token,
    /// The app's process id, to tell a stale file from a live app.
    pub pid: u32,
    /// The app's build.
    pub build: String,
    /// When the app started, RFC 3339 UTC.
    pub started_at: String,
    /// The repository the app serves.
    pub root: PathBuf,
    /// The page's address (`http://127.0.0.1:<port>/`), when `[ui]` is on;
    /// `krad ui` asks it for a login link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui: Option<String>,
}

/// Why api.json could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ApiJsonError {
    /// Neither `KRAD_ADE_API_JSON`, `XDG_RUNTIME_DIR` nor `HOME` is set.
    #[error("cannot tell where api.json lives: set KRAD_ADE_API_JSON or HOME")]
    NoLocation,
    /// The file is not there: no app has started, or it stopped cleanly.
    #[error("no api.json at {0}")]
    Missing(PathBuf),
    /// The file could not be read or parsed.
    #[error("cannot use {path}: {reason}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The directory is not private to this user.
    #[error(
        "{path} is not a private directory ({reason}); api.json holds a token, so it must \
         live in a directory only you can read (mode 0700): fix it or point KRAD_ADE_API_JSON elsewhere"
    )]
    UnsafeDirectory {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Writing failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Where api.json lives for this process's environment.
pub fn default_path() -> Result<PathBuf, ApiJsonError> {
    location(
        std::env::var_os(API_JSON_ENV),
        std::env::var_os("XDG_RUNTIME_DIR"),
        std::env::var_os("HOME"),
    )
}

fn location(
    explicit: Option<std::ffi::OsString>,
    runtime: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Result<PathBuf, ApiJsonError> {
    let non_empty = |v: Option<std::ffi::OsString>| v.filter(|v| !v.is_empty());
    if let Some(path) = non_empty(explicit) {
        return Ok(PathBuf::from(path));
    }
    if let Some(dir) = non_empty(runtime) {
        return Ok(PathBuf::from(dir).join("krad-ade").join("api.json"));
    }
    if let Some(home) = non_empty(home) {
        return Ok(PathBuf::from(home).join(".krad-ade").join("api.json"));
    }
    Err(ApiJsonError::NoLocation)
}

/// Writes api.json atomically and durably, 0600 ([`crate::private_file`]).
/// Creates the directory (0700) when missing and refuses one others can enter.
pub fn write(path: &Path, contents: &ApiJson) -> Result<(), ApiJsonError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    crate::private_file::ensure_dir(&dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::Other => ApiJsonError::UnsafeDirectory {
            path: dir.clone(),
            reason: e.to_string(),
        },
        _ => ApiJsonError::Write {
            path: dir.clone(),
            source: e,
        },
    })?;
    let write_err = |source| ApiJsonError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes =
        serde_json::to_vec_pretty(contents).map_err(|e| write_err(std::io::Error::other(e)))?;
    bytes.push(b'\n');
    crate::private_file::write(path, &bytes).map_err(write_err)
}

/// Reads api.json.
pub fn read(path: &Path) -> Result<ApiJson, ApiJsonError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ApiJsonError::Missing(path.to_path_buf()));
        }
        Err(e) => {
            return Err(ApiJsonError::Unreadable {
                path: path.to_path_buf(),
                reason: e.to_string(),
            });
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| ApiJsonError::Unreadable {
        path: path.to_path_buf(),
        reason: format!("not an api.json ({e})"),
    })
}

/// Removes api.json if it still names this process (another app may have
/// replaced it since).
pub fn remove_if_ours(path: &Path) {
    if let Ok(current) = read(path)
        && current.pid == std::process::id()
    {
        let _ = fs::remove_file(path);
    }
}

/// Whether a process with this id is running (signal 0; a zombie, which has
/// exited but not been reaped, counts as gone).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    let exists = match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        // It exists but belongs to someone else.
        Err(nix::errno::Errno::EPERM) => true,
        Err(_) => false,
    };
    exists && !is_zombie(pid)
}

/// Reads the state letter of `/proc/<pid>/stat` (Linux); elsewhere, never a zombie.
fn is_zombie(pid: i32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "Z")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn sample() -> ApiJson {
        ApiJson {
            api_version: 1,
            endpoint: "127.0.0.1:1".into(),
            token: Token::new("t".repeat(32)),
            pid: std::process::id(),
            build: "0.1.0".into(),
            started_at: "2026-11-29T00:00:00Z".into(),
            root: "/repo".into(),
            ui: None,
        }
    }

    #[test]
    fn location_order() {
        let p = |e: Option<&str>, r: Option<&str>, h: Option<&str>| {
            location(e.map(Into::into), r.map(Into::into), h.map(Into::into))
        };
        assert_eq!(
            p(Some("/x/a.json"), Some("/run"), Some("/h")).unwrap(),
            PathBuf::from("/x/a.json")
        );
        assert_eq!(
            p(None, Some("/run"), Some("/h")).unwrap(),
            PathBuf::from("/run/krad-ade/api.json")
        );
        assert_eq!(
            p(Some(""), Some(""), Some("/h")).unwrap(),
            PathBuf::from("/h/.krad-ade/api.json")
        );
        assert!(matches!(p(None, None, None), Err(ApiJsonError::NoLocation)));
    }

    #[test]
    fn written_private_and_read_back() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("sub").join("api.json");
        write(&path, &sample()).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            fs::metadata(path.parent().unwrap()).unwrap().mode() & 0o777,
            0o700
        );
        assert_eq!(read(&path).unwrap(), sample());
        remove_if_ours(&path);
        assert!(matches!(read(&path), Err(ApiJsonError::Missing(_))));
    }

    #[test]
    fn refuses_a_shared_directory() {
        let tmp = tempfile::tempdir().unwrap();
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let err = write(&tmp.path().join("api.json"), &sample()).unwrap_err();
        assert!(matches!(err, ApiJsonError::UnsafeDirectory { .. }), "{err}");
    }

    #[test]
    fn garbage_is_reported_not_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("api.json");
        fs::write(&path, "{not json").unwrap();
        assert!(matches!(read(&path), Err(ApiJsonError::Unreadable { .. })));
    }
}
