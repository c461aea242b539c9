//! The walk Collie makes of a socket path before every connection, as `krad
//! durable doctor` shows it.
//!
//! The seed's rules, checked with `lstat` on every segment from `/` down:
//!
//! * the path is absolute and at most [`MAX_PATH`](crate::socket_path::MAX_PATH)
//!   bytes (else `bad-path`);
//! * no segment is a symbolic link;
//! * no parent folder is writable by its group or others, unless it has the
//!   sticky bit (like `/tmp`);
//! * the socket's own folder belongs to the user (the effective uid) with mode
//!   0700 exactly;
//! * the socket is a socket that belongs to the user, with no group or other
//!   permission bits.
//!
//! The first segment breaking a rule makes the report `socket-not-private`. A
//! path where every rule holds but a segment does not exist is
//! `socket-missing`: the app is not serving there.

use std::fmt;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::socket_path;

/// Why Collie would refuse a socket path: a [`Report`]'s `code`, printed and
/// serialized as `socket-not-private`, `socket-missing` or `bad-path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DoctorCode {
    /// `socket-not-private`: a segment of the path breaks a rule.
    SocketNotPrivate,
    /// `socket-missing`: every rule holds but a segment does not exist.
    SocketMissing,
    /// `bad-path`: the path is not absolute, too long or not plain.
    BadPath,
}

impl DoctorCode {
    /// The code as `--json` and the text verdict show it.
    pub const fn as_str(self) -> &'static str {
        match self {
            DoctorCode::SocketNotPrivate => "socket-not-private",
            DoctorCode::SocketMissing => "socket-missing",
            DoctorCode::BadPath => "bad-path",
        }
    }
}

impl fmt::Display for DoctorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// What the walk saw at one segment of the path.
#[derive(Debug, Clone, Serialize)]
pub struct Segment {
    /// The path up to this segment (`/` first).
    pub path: PathBuf,
    /// What `lstat` found: `dir`, `socket`, `symlink`, `file`, `missing` or
    /// `other` (another kind, or an `lstat` that failed).
    pub kind: &'static str,
    /// The permission bits with the sticky, setuid and setgid bits, when known.
    pub mode: Option<u32>,
    /// The owner's uid, when known.
    pub owner: Option<u32>,
    /// The rule this segment breaks, in plain words.
    pub problem: Option<String>,
}

/// The outcome of a walk.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The socket path walked.
    pub path: PathBuf,
    /// Whether Collie would connect.
    pub ok: bool,
    /// Why not, when not ok.
    pub code: Option<DoctorCode>,
    /// The first failing segment.
    pub segment: Option<PathBuf>,
    /// What is wrong with it, in plain words.
    pub problem: Option<String>,
    /// Every segment from `/` down to the socket (none for `bad-path`).
    pub segments: Vec<Segment>,
}

impl Report {
    /// A walk that found `code` at `segment`.
    fn refused(
        path: &Path,
        code: DoctorCode,
        segment: Option<PathBuf>,
        problem: String,
        segments: Vec<Segment>,
    ) -> Report {
        Report {
            path: path.to_path_buf(),
            ok: false,
            code: Some(code),
            segment,
            problem: Some(problem),
            segments,
        }
    }
}

/// What `lstat` found at a segment ([`Segment::kind`] is its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    Socket,
    Symlink,
    File,
    Missing,
    /// Another kind, or an `lstat` that failed.
    Other,
}

impl Kind {
    fn of(file_type: fs::FileType) -> Kind {
        if file_type.is_symlink() {
            Kind::Symlink
        } else if file_type.is_dir() {
            Kind::Dir
        } else if file_type.is_socket() {
            Kind::Socket
        } else if file_type.is_file() {
            Kind::File
        } else {
            Kind::Other
        }
    }

    const fn as_str(self) -> &'static str {
        match self {
            Kind::Dir => "dir",
            Kind::Socket => "socket",
            Kind::Symlink => "symlink",
            Kind::File => "file",
            Kind::Missing => "missing",
            Kind::Other => "other",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// The role of a segment in the path, which decides its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A folder above the socket's own folder.
    Parent,
    /// The folder the socket is in.
    Folder,
    /// The socket itself.
    Socket,
}

impl Role {
    /// The role of the segment at `index` of a path whose socket is at `last`.
    fn at(index: usize, last: usize) -> Role {
        if index == last {
            Role::Socket
        } else if index + 1 == last {
            Role::Folder
        } else {
            Role::Parent
        }
    }
}

/// Walks `path` as Collie does before connecting.
pub fn walk(path: &Path) -> Report {
    if let Err(e) = socket_path::check_path(path) {
        return Report::refused(path, DoctorCode::BadPath, None, e.0, Vec::new());
    }
    let me = nix::unistd::geteuid().as_raw();
    let prefixes: Vec<&Path> = {
        let mut all: Vec<&Path> = path.ancestors().collect();
        all.reverse();
        all
    };
    let last = prefixes.len().saturating_sub(1);
    let mut segments = Vec::with_capacity(prefixes.len());
    let mut first: Option<(DoctorCode, PathBuf, String)> = None;
    let mut gone = false;
    for (index, prefix) in prefixes.iter().enumerate() {
        let (kind, segment) = if gone {
            // Below a missing segment nothing exists; only the first says so.
            (Kind::Missing, segment(prefix, Kind::Missing, None, None))
        } else {
            inspect(prefix, Role::at(index, last), me)
        };
        gone |= kind == Kind::Missing;
        if let (None, Some(problem)) = (&first, &segment.problem) {
            let code = if kind == Kind::Missing {
                DoctorCode::SocketMissing
            } else {
                DoctorCode::SocketNotPrivate
            };
            first = Some((code, segment.path.clone(), problem.clone()));
        }
        segments.push(segment);
    }
    match first {
        None => Report {
            path: path.to_path_buf(),
            ok: true,
            code: None,
            segment: None,
            problem: None,
            segments,
        },
        Some((code, segment, problem)) => {
            Report::refused(path, code, Some(segment), problem, segments)
        }
    }
}

/// A segment of `kind` with what `lstat` told of it (no problem yet).
fn segment(path: &Path, kind: Kind, mode: Option<u32>, owner: Option<u32>) -> Segment {
    Segment {
        path: path.to_path_buf(),
        kind: kind.as_str(),
        mode,
        owner,
        problem: None,
    }
}

/// `lstat`s one segment and checks the rules of its role.
fn inspect(path: &Path, role: Role, me: u32) -> (Kind, Segment) {
    let shown = path.display();
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) => {
            let missing = e.kind() == ErrorKind::NotFound || e.kind() == ErrorKind::NotADirectory;
            let problem = if missing && role == Role::Socket {
                format!(
                    "{shown} does not exist: the app is not serving there \
                     (start it with the durable facet on, or check COLLIE_DURABLE_SOCKET)"
                )
            } else if missing {
                format!(
                    "{shown} does not exist: the app is not serving there (it makes the \
                     socket's folder when it starts)"
                )
            } else {
                format!("{shown} cannot be examined: {e}")
            };
            let kind = if missing { Kind::Missing } else { Kind::Other };
            let segment = Segment {
                problem: Some(problem),
                ..segment(path, kind, None, None)
            };
            return (kind, segment);
        }
    };
    let kind = Kind::of(meta.file_type());
    let mode = meta.mode() & 0o7777;
    let owner = meta.uid();
    let segment = Segment {
        problem: problem(path, role, kind, mode, owner, me),
        ..segment(path, kind, Some(mode), Some(owner))
    };
    (kind, segment)
}

/// The rule a segment of this kind, mode and owner breaks in its role, if any.
fn problem(path: &Path, role: Role, kind: Kind, mode: u32, owner: u32, me: u32) -> Option<String> {
    let shown = path.display();
    if kind == Kind::Symlink {
        let target = fs::read_link(path)
            .map(|t| format!(" (to {})", t.display()))
            .unwrap_or_default();
        return Some(format!(
            "{shown} is a symbolic link{target}: Collie refuses any link in the path; \
             use the real path"
        ));
    }
    match role {
        Role::Parent => {
            if kind != Kind::Dir {
                return Some(format!("{shown} is not a folder (it is a {kind})"));
            }
            let writable = match (mode & 0o020 != 0, mode & 0o002 != 0) {
                (true, true) => Some("its group and others"),
                (true, false) => Some("its group"),
                (false, true) => Some("others"),
                (false, false) => None,
            };
            match writable {
                Some(who) if mode & 0o1000 == 0 => Some(format!(
                    "{shown} is writable by {who} (mode {mode:04o}) and not sticky: \
                     another user could swap the folders below it (chmod go-w {shown})"
                )),
                _ => None,
            }
        }
        Role::Folder => {
            if kind != Kind::Dir {
                return Some(format!(
                    "{shown} (the socket's folder) is not a folder (it is a {kind})"
                ));
            }
            if owner != me {
                return Some(format!(
                    "{shown} (the socket's folder) belongs to uid {owner}, not to you (uid {me})"
                ));
            }
            if mode & 0o777 != 0o700 {
                return Some(format!(
                    "{shown} (the socket's folder) has mode {mode:04o}, not 0700 (chmod 700 {shown})"
                ));
            }
            None
        }
        Role::Socket => {
            if kind != Kind::Socket {
                return Some(format!("{shown} is not a socket (it is a {kind})"));
            }
            if owner != me {
                return Some(format!(
                    "the socket {shown} belongs to uid {owner}, not to you (uid {me})"
                ));
            }
            if mode & 0o077 != 0 {
                return Some(format!(
                    "the socket {shown} has mode {mode:04o}: its group or others have rights \
                     (chmod 600 {shown})"
                ));
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixListener;

    use super::*;

    /// A tempdir whose own path walks clean (canonical: macOS's /tmp is a link).
    struct Fixture {
        _dir: tempfile::TempDir,
        base: PathBuf,
    }

    impl Fixture {
        fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let base = dir.path().canonicalize().unwrap();
            chmod(&base, 0o700);
            Fixture { _dir: dir, base }
        }

        /// Makes `rel` as a folder chain, each with `mode`.
        fn folder(&self, rel: &str, mode: u32) -> PathBuf {
            let path = self.base.join(rel);
            fs::create_dir_all(&path).unwrap();
            chmod(&path, mode);
            path
        }
    }

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn socket_in(folder: &Path, mode: u32) -> (UnixListener, PathBuf) {
        let path = folder.join("krad.sock");
        let listener = UnixListener::bind(&path).unwrap();
        chmod(&path, mode);
        (listener, path)
    }

    #[test]
    fn a_private_socket_passes() {
        let fx = Fixture::new();
        let folder = fx.folder("priv", 0o700);
        let (_l, path) = socket_in(&folder, 0o600);
        let report = walk(&path);
        assert!(report.ok, "{report:?}");
        assert_eq!(report.code, None);
        assert_eq!(report.segments.first().unwrap().path, Path::new("/"));
        let last = report.segments.last().unwrap();
        assert_eq!((last.kind, last.mode), ("socket", Some(0o600)));
        assert!(report.segments.iter().all(|s| s.problem.is_none()));
    }

    #[test]
    fn a_group_writable_parent_fails_unless_sticky() {
        let fx = Fixture::new();
        let parent = fx.folder("shared", 0o775);
        let folder = fx.folder("shared/priv", 0o700);
        let (_l, path) = socket_in(&folder, 0o600);
        let report = walk(&path);
        assert_eq!(report.code, Some(DoctorCode::SocketNotPrivate));
        assert_eq!(report.segment.as_deref(), Some(parent.as_path()));
        let problem = report.problem.unwrap();
        assert!(
            problem.contains("writable by its group (mode 0775) and not sticky"),
            "{problem}"
        );

        chmod(&parent, 0o757);
        let problem = walk(&path).problem.unwrap();
        assert!(
            problem.contains("writable by others (mode 0757)"),
            "{problem}"
        );

        chmod(&parent, 0o1777);
        let report = walk(&path);
        assert!(report.ok, "{report:?}");
    }

    #[test]
    fn a_symlink_anywhere_fails() {
        let fx = Fixture::new();
        let real = fx.folder("real", 0o700);
        let (_l, _) = socket_in(&real, 0o600);
        let link = fx.base.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let report = walk(&link.join("krad.sock"));
        assert_eq!(report.code, Some(DoctorCode::SocketNotPrivate));
        assert_eq!(report.segment.as_deref(), Some(link.as_path()));
        let problem = report.problem.unwrap();
        assert!(problem.contains("symbolic link"), "{problem}");

        // The socket itself a link to a good socket.
        let sock_link = real.join("alias.sock");
        std::os::unix::fs::symlink(real.join("krad.sock"), &sock_link).unwrap();
        let report = walk(&sock_link);
        assert_eq!(report.segment.as_deref(), Some(sock_link.as_path()));
        assert_eq!(report.segments.last().unwrap().kind, "symlink");
    }

    #[test]
    fn the_folder_must_be_0700() {
        let fx = Fixture::new();
        let folder = fx.folder("open", 0o755);
        let (_l, path) = socket_in(&folder, 0o600);
        let report = walk(&path);
        assert_eq!(report.code, Some(DoctorCode::SocketNotPrivate));
        assert_eq!(report.segment.as_deref(), Some(folder.as_path()));
        assert!(report.problem.unwrap().contains("mode 0755, not 0700"));

        chmod(&folder, 0o750);
        assert_eq!(walk(&path).code, Some(DoctorCode::SocketNotPrivate));
        chmod(&folder, 0o700);
        assert!(walk(&path).ok);
    }

    #[test]
    fn the_socket_must_be_a_private_socket() {
        let fx = Fixture::new();
        let folder = fx.folder("priv", 0o700);
        let (_l, path) = socket_in(&folder, 0o660);
        let report = walk(&path);
        assert_eq!(report.code, Some(DoctorCode::SocketNotPrivate));
        assert_eq!(report.segment.as_deref(), Some(path.as_path()));
        assert!(report.problem.unwrap().contains("mode 0660"));

        let file = folder.join("plain");
        fs::write(&file, b"").unwrap();
        chmod(&file, 0o600);
        let report = walk(&file);
        assert_eq!(report.code, Some(DoctorCode::SocketNotPrivate));
        assert_eq!(report.segments.last().unwrap().kind, "file");
        assert!(report.problem.unwrap().contains("not a socket"));
    }

    #[test]
    fn a_missing_socket_or_folder_is_socket_missing() {
        let fx = Fixture::new();
        let folder = fx.folder("priv", 0o700);
        let report = walk(&folder.join("krad.sock"));
        assert_eq!(report.code, Some(DoctorCode::SocketMissing));
        assert_eq!(report.segments.last().unwrap().kind, "missing");

        let report = walk(&fx.base.join("nothing/here/krad.sock"));
        assert_eq!(report.code, Some(DoctorCode::SocketMissing));
        assert_eq!(
            report.segment.as_deref(),
            Some(fx.base.join("nothing").as_path())
        );
        let kinds: Vec<&str> = report
            .segments
            .iter()
            .rev()
            .take(3)
            .map(|s| s.kind)
            .collect();
        assert_eq!(kinds, ["missing"; 3]);

        // A broken rule above a missing socket is what is reported.
        chmod(&folder, 0o755);
        assert_eq!(
            walk(&folder.join("krad.sock")).code,
            Some(DoctorCode::SocketNotPrivate)
        );
    }

    #[test]
    fn bad_paths() {
        for path in ["relative.sock", "", "/a/../b.sock"] {
            let report = walk(Path::new(path));
            assert_eq!(report.code, Some(DoctorCode::BadPath), "{path}");
            assert!(report.segments.is_empty());
        }
        let long = format!("/tmp/{}", "x".repeat(200));
        assert_eq!(walk(Path::new(&long)).code, Some(DoctorCode::BadPath));
    }

    #[test]
    fn serializes_as_the_cli_prints_it() {
        let report = walk(Path::new("relative"));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["ok"], false);
        assert_eq!(json["code"], "bad-path");
        assert!(json["segment"].is_null());
        assert!(json["segments"].as_array().unwrap().is_empty());
    }

    #[test]
    fn codes_keep_their_names() {
        for (code, name) in [
            (DoctorCode::SocketNotPrivate, "socket-not-private"),
            (DoctorCode::SocketMissing, "socket-missing"),
            (DoctorCode::BadPath, "bad-path"),
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), name);
            assert_eq!(code.to_string(), name);
            assert_eq!(code.as_str(), name);
        }
    }
}
