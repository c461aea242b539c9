//! `krad durable doctor`: the walk Collie makes of a socket path, through the
//! real binary (no app needed).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::{KRAD, exit_code, stderr, stdout};

/// A temp folder whose own path walks clean (canonical, since macOS's temp
/// folders sit behind a symlink), kept private.
struct Base {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Base {
    fn new() -> Base {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap();
        chmod(&path, 0o700);
        Base { _dir: dir, path }
    }

    /// Makes the folder `rel` (and its parents) with `mode` on the last one.
    fn folder(&self, rel: &str, mode: u32) -> PathBuf {
        let path = self.path.join(rel);
        fs::create_dir_all(&path).unwrap();
        chmod(&path, mode);
        path
    }
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A real listening socket at `folder/krad.sock`, mode 0600.
fn socket_in(folder: &Path) -> (UnixListener, PathBuf) {
    let path = folder.join("krad.sock");
    let listener = UnixListener::bind(&path).unwrap();
    chmod(&path, 0o600);
    (listener, path)
}

fn doctor(args: &[&str], env: Option<&Path>) -> Output {
    let mut cmd = Command::new(KRAD);
    cmd.args(["durable", "doctor"])
        .args(args)
        .env_remove("COLLIE_DURABLE_SOCKET")
        .stdin(Stdio::null());
    if let Some(path) = env {
        cmd.env("COLLIE_DURABLE_SOCKET", path);
    }
    cmd.output().unwrap()
}

/// `krad durable doctor --socket PATH --json`: the exit code and the report.
fn walk(path: &Path) -> (i32, Value) {
    let out = doctor(&["--socket", path.to_str().unwrap(), "--json"], None);
    let report: Value = serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (exit_code(&out), report)
}

#[test]
fn a_private_socket_passes() {
    let base = Base::new();
    let (_listener, path) = socket_in(&base.folder("priv", 0o700));
    let (code, report) = walk(&path);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["ok"], true);
    assert!(report["code"].is_null());
    assert_eq!(report["path"], path.to_str().unwrap());
    let segments = report["segments"].as_array().unwrap();
    assert_eq!(segments[0]["path"], "/");
    assert_eq!(segments.last().unwrap()["kind"], "socket");
    assert_eq!(segments.last().unwrap()["mode"], 0o600);

    // The text form: one ✓ line per segment, then the verdict.
    let out = doctor(&[], Some(&path));
    assert_eq!(exit_code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(
        text.lines().filter(|l| l.starts_with('✓')).count(),
        segments.len()
    );
    assert!(text.lines().last().unwrap().starts_with("ok: "), "{text}");
}

#[test]
fn a_group_writable_parent_is_not_private_unless_sticky() {
    let base = Base::new();
    let shared = base.folder("shared", 0o775);
    let (_listener, path) = socket_in(&base.folder("shared/priv", 0o700));
    let (code, report) = walk(&path);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["ok"], false);
    assert_eq!(report["code"], "socket-not-private");
    assert_eq!(report["segment"], shared.to_str().unwrap());
    let problem = report["problem"].as_str().unwrap();
    assert!(
        problem.contains("writable by its group (mode 0775) and not sticky"),
        "{problem}"
    );

    let out = doctor(&["--socket", path.to_str().unwrap()], None);
    assert_eq!(exit_code(&out), 1);
    let text = stdout(&out);
    let failing: Vec<&str> = text.lines().filter(|l| l.starts_with('✗')).collect();
    assert_eq!(failing.len(), 1, "{text}");
    assert!(failing[0].contains(shared.to_str().unwrap()), "{text}");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("socket-not-private: "),
        "{text}"
    );

    // A sticky 1777 parent, like /tmp, is fine.
    chmod(&shared, 0o1777);
    let (code, report) = walk(&path);
    assert_eq!(code, 0, "{report}");
}

#[test]
fn a_symlinked_segment_is_flagged() {
    let base = Base::new();
    let real = base.folder("real", 0o700);
    let (_listener, _) = socket_in(&real);
    let link = base.path.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let (code, report) = walk(&link.join("krad.sock"));
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["code"], "socket-not-private");
    assert_eq!(report["segment"], link.to_str().unwrap());
    assert!(
        report["problem"]
            .as_str()
            .unwrap()
            .contains("symbolic link"),
        "{report}"
    );
}

#[test]
fn a_socket_folder_open_to_others_is_flagged() {
    let base = Base::new();
    let folder = base.folder("open", 0o755);
    let (_listener, path) = socket_in(&folder);
    let (code, report) = walk(&path);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["code"], "socket-not-private");
    assert_eq!(report["segment"], folder.to_str().unwrap());
    assert!(
        report["problem"].as_str().unwrap().contains("0755"),
        "{report}"
    );
}

#[test]
fn a_missing_socket_is_socket_missing() {
    let base = Base::new();
    let path = base.folder("priv", 0o700).join("krad.sock");
    let (code, report) = walk(&path);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["code"], "socket-missing");
    assert_eq!(report["segment"], path.to_str().unwrap());
}

#[test]
fn a_relative_path_is_a_bad_path() {
    let (code, report) = walk(Path::new("run/krad.sock"));
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["code"], "bad-path");
    assert!(report["segments"].as_array().unwrap().is_empty());
}

#[test]
fn without_a_path_it_is_a_usage_error() {
    let out = doctor(&[], None);
    assert_eq!(exit_code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("--socket") && err.contains("COLLIE_DURABLE_SOCKET"),
        "{err}"
    );
}
