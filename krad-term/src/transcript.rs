//! The transcript file: everything a program printed, raw, appended to a file that
//! only its owner can read (mode 0600, in directories created 0700).
//!
//! Writes are buffered and blocking: call them from a thread that may block, never
//! from an async task. A failing transcript is logged once and abandoned; the
//! terminal goes on without it.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

const BUFFER_BYTES: usize = 64 * 1024;

/// A transcript being written, or abandoned after an error.
#[derive(Debug)]
pub(crate) struct Transcript {
    path: PathBuf,
    file: Option<BufWriter<File>>,
}

impl Transcript {
    /// Opens (creates, appends to) the transcript at `path`. An error is logged and
    /// gives a transcript that writes nothing.
    pub(crate) fn open(path: &Path, terminal: u64) -> Self {
        let file = match open_file(path) {
            Ok(file) => Some(BufWriter::with_capacity(BUFFER_BYTES, file)),
            Err(error) => {
                tracing::warn!(terminal, path = %path.display(), %error, "cannot open the transcript; the terminal goes on without it");
                None
            }
        };
        Self {
            path: path.to_owned(),
            file,
        }
    }

    /// Appends `bytes` (buffered).
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        if let Some(file) = &mut self.file {
            let result = file.write_all(bytes);
            self.check(result, "write");
        }
    }

    /// Writes out what is buffered.
    pub(crate) fn flush(&mut self) {
        if let Some(file) = &mut self.file {
            let result = file.flush();
            self.check(result, "flush");
        }
    }

    fn check(&mut self, result: std::io::Result<()>, what: &str) {
        if let Err(error) = result {
            tracing::warn!(path = %self.path.display(), %error, "cannot {what} the transcript; no more is written to it");
            // Drop the writer without flushing again (`into_parts` skips the flush
            // `Drop` would try).
            if let Some(file) = self.file.take() {
                drop(file.into_parts());
            }
        }
    }
}

impl Drop for Transcript {
    fn drop(&mut self) {
        self.flush();
    }
}

fn open_file(path: &Path) -> std::io::Result<File> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)?;
    // An existing file keeps its mode on open: make sure it is private too.
    file.set_permissions(Permissions::from_mode(0o600))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_dirs_and_a_private_file_and_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/t.log");
        {
            let mut t = Transcript::open(&path, 1);
            t.write(b"one ");
        }
        {
            let mut t = Transcript::open(&path, 1);
            t.write(b"two");
            t.flush();
            assert_eq!(std::fs::read(&path).unwrap(), b"one two");
        }
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o077, 0);
    }

    #[test]
    fn an_unopenable_transcript_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        // A path under a regular file cannot be created.
        let mut t = Transcript::open(&file.join("t.log"), 1);
        t.write(b"data");
        t.flush();
        assert!(t.file.is_none());
    }

    #[test]
    fn a_failing_write_abandons_the_transcript() {
        let path = Path::new("/dev/full");
        if !path.exists() {
            return;
        }
        let mut t = Transcript {
            path: path.to_owned(),
            file: Some(BufWriter::with_capacity(
                16,
                OpenOptions::new().append(true).open(path).unwrap(),
            )),
        };
        t.write(&[b'x'; 64]);
        assert!(t.file.is_none());
        t.write(b"more");
        t.flush();
    }
}
