//! The transcript file: everything a program printed, raw, appended to a file that
//! only its owner can read (mode 0600, in directories created 0700).
//!
//! Writes are buffered and blocking: call them from a thread that may block, never
//! from an async task. A failing transcript is logged once and abandoned; the
//! terminal goes on without it.
//!
//! A transcript is bounded: past [`MAX_TRANSCRIPT`] bytes it moves to
//! `<name>.1` (replacing an older one) and a new file starts, so a terminal
//! keeps at most twice that on disk — its newest output.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

const BUFFER_BYTES: usize = 64 * 1024;

/// The most one transcript file holds before it moves aside (`<name>.1`).
pub(crate) const MAX_TRANSCRIPT: u64 = 64 * 1024 * 1024;

/// A transcript being written, or abandoned after an error.
#[derive(Debug)]
pub(crate) struct Transcript {
    path: PathBuf,
    file: Option<BufWriter<File>>,
    /// Bytes in the current file.
    size: u64,
    limit: u64,
}

impl Transcript {
    /// Opens (creates, appends to) the transcript at `path`. An error is logged and
    /// gives a transcript that writes nothing.
    pub(crate) fn open(path: &Path, terminal: u64) -> Self {
        Self::open_with_limit(path, terminal, MAX_TRANSCRIPT)
    }

    fn open_with_limit(path: &Path, terminal: u64, limit: u64) -> Self {
        let (file, size) = match open_file(path) {
            Ok(file) => {
                let size = file.metadata().map_or(0, |m| m.len());
                (Some(BufWriter::with_capacity(BUFFER_BYTES, file)), size)
            }
            Err(error) => {
                tracing::warn!(terminal, path = %path.display(), %error, "cannot open the transcript; the terminal goes on without it");
                (None, 0)
            }
        };
        Self {
            path: path.to_owned(),
            file,
            size,
            limit: limit.max(1),
        }
    }

    /// Appends `bytes` (buffered); moves the file aside first when they would
    /// take it past its limit.
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        if self.file.is_some() && self.size > 0 && self.size + bytes.len() as u64 > self.limit {
            self.rotate();
        }
        if let Some(file) = &mut self.file {
            let result = file.write_all(bytes);
            self.size += bytes.len() as u64;
            self.check(result, "write");
        }
    }

    /// Moves the full file to `<name>.1` and starts a new one.
    fn rotate(&mut self) {
        self.flush();
        let Some(file) = self.file.take() else {
            return;
        };
        drop(file.into_parts());
        let mut aside = self.path.clone().into_os_string();
        aside.push(".1");
        let result = std::fs::rename(&self.path, &aside).and_then(|()| open_file(&self.path));
        match result {
            Ok(file) => {
                self.file = Some(BufWriter::with_capacity(BUFFER_BYTES, file));
                self.size = 0;
            }
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "cannot move the full transcript aside; no more is written to it");
            }
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
    fn a_full_transcript_moves_aside_and_the_newest_output_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.log");
        let aside = dir.path().join("t.log.1");
        let mut t = Transcript::open_with_limit(&path, 1, 10);
        t.write(b"0123456789");
        t.write(b"abcdef");
        t.write(b"ghij");
        t.write(b"KLMNOP");
        t.flush();
        assert_eq!(std::fs::read(&aside).unwrap(), b"abcdefghij");
        assert_eq!(std::fs::read(&path).unwrap(), b"KLMNOP");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Reopened, it counts what is there.
        drop(t);
        let mut again = Transcript::open_with_limit(&path, 1, 10);
        again.write(b"qrstu");
        again.flush();
        assert_eq!(std::fs::read(&aside).unwrap(), b"KLMNOP");
        assert_eq!(std::fs::read(&path).unwrap(), b"qrstu");
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
            size: 0,
            limit: MAX_TRANSCRIPT,
        };
        t.write(&[b'x'; 64]);
        assert!(t.file.is_none());
        t.write(b"more");
        t.flush();
    }
}
