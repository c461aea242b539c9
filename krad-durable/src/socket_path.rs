//! The seed's rules for a socket path, which both the binding of the socket
//! ([`crate::socket`]) and Collie's walk of it ([`crate::doctor`]) start from:
//! absolute, at most [`MAX_PATH`] bytes, plain.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The longest socket path, in bytes, the seed allows (the smallest `sun_path`
/// of the supported systems, 104 on macOS, less its NUL).
pub const MAX_PATH: usize = 103;

/// Why the socket path cannot be used or bound. Its message names the path
/// and says what to do next.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SocketError(pub String);

/// Checks the path rules of the seed: absolute, at most [`MAX_PATH`] bytes, no
/// NUL, and a plain path to a file (no `.` or `..` segment, no trailing `/`), so
/// that Collie's walk of its segments means what it says.
pub fn check_path(path: &Path) -> Result<(), SocketError> {
    let bytes = path.as_os_str().as_bytes();
    let shown = path.display();
    if bytes.is_empty() {
        return Err(SocketError(
            "the socket path is empty: give an absolute path such as /run/user/1000/krad/durable.sock"
                .to_owned(),
        ));
    }
    if !path.is_absolute() {
        return Err(SocketError(format!(
            "the socket path {shown} is relative: give an absolute path (it starts with /)"
        )));
    }
    if bytes.len() > MAX_PATH {
        return Err(SocketError(format!(
            "the socket path {shown} is {} bytes long, at most {MAX_PATH} are allowed: pick a shorter path",
            bytes.len()
        )));
    }
    if bytes.contains(&0) {
        return Err(SocketError(
            "the socket path contains a NUL byte: give a plain absolute path".to_owned(),
        ));
    }
    if bytes.ends_with(b"/") {
        return Err(SocketError(format!(
            "the socket path {shown} ends with /: it must name the socket file, not a folder"
        )));
    }
    let dotted = bytes
        .split(|&b| b == b'/')
        .any(|segment| segment == b"." || segment == b"..");
    if dotted {
        return Err(SocketError(format!(
            "the socket path {shown} has a . or .. segment: give it without them"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn paths_must_be_absolute_short_and_plain() {
        assert!(check_path(Path::new("/run/user/1000/krad/durable.sock")).is_ok());
        assert!(check_path(Path::new("krad.sock")).is_err());
        assert!(check_path(Path::new("./krad.sock")).is_err());
        assert!(check_path(Path::new("")).is_err());
        assert!(check_path(Path::new("/a/../b.sock")).is_err());
        assert!(check_path(Path::new("/a/./b.sock")).is_err());
        assert!(check_path(Path::new("/a/b/")).is_err());
        let exactly = format!("/{}", "x".repeat(MAX_PATH - 1));
        assert!(check_path(Path::new(&exactly)).is_ok());
        let over = format!("/{}", "x".repeat(MAX_PATH));
        let error = check_path(Path::new(&over)).unwrap_err().to_string();
        assert!(error.contains("104 bytes"), "{error}");
        let nul = std::ffi::OsStr::from_bytes(b"/a/b\0c");
        assert!(check_path(Path::new(nul)).is_err());
    }
}
