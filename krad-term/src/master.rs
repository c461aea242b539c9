//! A pseudo-terminal's master side, the app's end of a PTY terminal: opening it,
//! and the two halves it is used through.
//!
//! * [`Reader`]: the program's output, read in chunks of what waits at once;
//! * [`Writer`]: input and resizes.
//!
//! Each half is a descriptor of its own, registered with the runtime's event
//! loop for its one direction only (the writing half at its first write).

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::task::{Context, Poll, ready};

use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A freshly opened terminal.
pub(crate) struct Opened {
    /// The master side (non-blocking, close-on-exec).
    pub(crate) master: OwnedFd,
    /// The program side, held open until the program opened it for itself.
    pub(crate) program_side: OwnedFd,
    /// The program side's path (`/dev/pts/N`).
    pub(crate) name: CString,
}

/// Opens a new terminal of `cols` × `rows`.
pub(crate) fn open(cols: u16, rows: u16) -> io::Result<Opened> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let program_side = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(std::ffi::OsStr::from_bytes(name.as_bytes()))?
        .into();
    rustix::io::ioctl_fionbio(&master, true)?;
    resize(&master, cols, rows)?;
    Ok(Opened {
        master,
        program_side,
        name,
    })
}

/// Sets the terminal's size (the program gets SIGWINCH).
fn resize(master: &OwnedFd, cols: u16, rows: u16) -> io::Result<()> {
    let size = Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    Ok(rustix::termios::tcsetwinsize(master.as_fd(), size)?)
}

/// Registers `fd` with the current runtime's event loop for `interest`.
#[allow(unsafe_code)]
fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the `AsyncFd` owns the descriptor: it stays open, and the same
    // descriptor, until the `AsyncFd` is dropped.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(Into::into)
}

/// The reading half: registered on the runtime it is made on, for readability only.
#[derive(Debug)]
pub(crate) struct Reader {
    fd: AsyncFd<OwnedFd>,
}

impl Reader {
    /// Registers `master` (a descriptor of its own) on the current runtime.
    pub(crate) fn new(master: OwnedFd) -> io::Result<Self> {
        Ok(Self {
            fd: register(master, Interest::READABLE)?,
        })
    }

    /// Waits for output, then reads all that waits, up to `max` bytes, into one
    /// chunk (a PTY gives 4 KiB per read at most: a program printing flat out
    /// reaches the parser in fewer, larger chunks). `None` once the terminal's
    /// output ended (EOF, or EIO: every process closed the terminal).
    ///
    /// Cancel-safe: it waits only before it reads.
    pub(crate) async fn read_chunk(&self, max: usize) -> Option<Vec<u8>> {
        loop {
            let mut ready = match self.fd.readable().await {
                Ok(ready) => ready,
                Err(error) => {
                    tracing::warn!(%error, "cannot wait for the terminal's output; its output ends here");
                    return None;
                }
            };
            let mut chunk = vec![0; max];
            let mut filled = 0;
            let ended = loop {
                if filled == max {
                    break false;
                }
                match rustix::io::read(self.fd.get_ref(), &mut chunk[filled..]) {
                    Ok(0) => break true,
                    Ok(n) => filled += n,
                    Err(rustix::io::Errno::INTR) => {}
                    Err(rustix::io::Errno::AGAIN) => {
                        // Wait for the next readiness event (one that came
                        // since `ready` was given is kept).
                        ready.clear_ready();
                        break false;
                    }
                    Err(error) => {
                        if error != rustix::io::Errno::IO {
                            tracing::warn!(%error, "cannot read the terminal; its output ends here");
                        }
                        break true;
                    }
                }
            };
            if filled > 0 {
                // An end is found again by the next read.
                chunk.truncate(filled);
                return Some(chunk);
            }
            if ended {
                return None;
            }
        }
    }
}

/// The writing half: registered for writability only, on the runtime of its
/// first write (a terminal never written to costs no registration).
#[derive(Debug)]
pub(crate) enum Writer {
    /// Not written to yet.
    Unregistered(OwnedFd),
    Registered(AsyncFd<OwnedFd>),
    /// Only while a registration fails (the descriptor is then closed).
    Lost,
}

impl Writer {
    /// The writing half on `master` (a descriptor of its own).
    pub(crate) fn new(master: OwnedFd) -> Self {
        Self::Unregistered(master)
    }

    /// Writes some of `bytes` once the terminal takes input. Must be called
    /// within a tokio runtime.
    pub(crate) fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        if matches!(self, Self::Unregistered(_))
            && let Self::Unregistered(master) = std::mem::replace(self, Self::Lost)
        {
            *self = Self::Registered(register(master, Interest::WRITABLE)?);
        }
        let Self::Registered(fd) = self else {
            return Poll::Ready(Err(io::Error::other(
                "the terminal's input could not be registered",
            )));
        };
        loop {
            let mut guard = ready!(fd.poll_write_ready(cx))?;
            match guard.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), bytes)?)) {
                Ok(written) => return Poll::Ready(written),
                // Not writable after all: readiness cleared, wait again.
                Err(_would_block) => {}
            }
        }
    }

    /// Sets the terminal's size.
    pub(crate) fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        match self {
            Self::Unregistered(master) => resize(master, cols, rows),
            Self::Registered(fd) => resize(fd.get_ref(), cols, rows),
            Self::Lost => Err(io::Error::other(
                "the terminal's input could not be registered",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    /// What the program side printed, then the end once it is closed.
    #[tokio::test]
    async fn a_chunk_holds_what_was_printed_and_the_end_follows_it() {
        let opened = open(80, 24).unwrap();
        let reader = Reader::new(opened.master.try_clone().unwrap()).unwrap();
        let mut program_side = std::fs::File::from(opened.program_side);
        program_side.write_all(b"hello").unwrap();
        drop(program_side);
        let mut read = Vec::new();
        while let Some(chunk) = reader.read_chunk(32 * 1024).await {
            assert!(!chunk.is_empty() && chunk.len() <= 32 * 1024);
            read.extend_from_slice(&chunk);
        }
        assert_eq!(read, b"hello");
        // The end stays the end.
        assert_eq!(reader.read_chunk(32 * 1024).await, None);
    }

    /// Input written to the master side reaches the program side; the size set
    /// is the terminal's.
    #[tokio::test]
    async fn input_reaches_the_program_side_and_resizes_hold() {
        let opened = open(80, 24).unwrap();
        let mut writer = Writer::new(opened.master);
        // Before the first write (not registered yet) and after it.
        writer.resize(90, 20).unwrap();
        let size = rustix::termios::tcgetwinsize(&opened.program_side).unwrap();
        assert_eq!((size.ws_col, size.ws_row), (90, 20));
        // A whole line: the program side reads lines (canonical mode).
        let written = std::future::poll_fn(|cx| writer.poll_write(cx, b"x\n")).await;
        assert_eq!(written.unwrap(), 2);
        assert!(matches!(writer, Writer::Registered(_)));
        writer.resize(100, 30).unwrap();
        let size = rustix::termios::tcgetwinsize(&opened.program_side).unwrap();
        assert_eq!((size.ws_col, size.ws_row), (100, 30));
        let mut line = [0u8; 8];
        let n = rustix::io::read(&opened.program_side, &mut line).unwrap();
        assert_eq!(&line[..n], b"x\n");
    }
}
