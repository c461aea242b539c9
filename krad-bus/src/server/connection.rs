//! One connection's bytes: reading the request line within its limits, writing
//! the answer so that it survives a client that is still sending, and noticing a
//! client that leaves.

use std::io::Read as _;
use std::time::Duration;

use futures_util::FutureExt as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use tokio_util::sync::CancellationToken;

use super::Subscription;
use crate::protocol::{MAX_LINE, StreamLine, StreamMessage};

/// How long writing an answer may take before the client is given up on.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What reading the request line gave.
#[derive(Debug)]
pub(crate) enum LineRead {
    /// A complete line, without its `\n`.
    Line(Vec<u8>),
    /// [`MAX_LINE`] bytes arrived without a `\n`; nothing past them was buffered.
    TooLong,
    /// The client closed its side first; `partial` if it had sent some bytes.
    Closed {
        /// Whether bytes without a final `\n` arrived.
        partial: bool,
    },
}

/// Reads up to the first `\n`, never buffering more than [`MAX_LINE`] bytes.
/// Bytes after the `\n` that arrived in the same read are dropped.
pub(crate) async fn read_line(stream: &mut TcpStream) -> std::io::Result<LineRead> {
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut scanned = 0;
    loop {
        let room = MAX_LINE - buf.len();
        if room == 0 {
            return Ok(LineRead::TooLong);
        }
        if buf.len() == buf.capacity() {
            buf.reserve(buf.len().clamp(1024, room));
        }
        let n = (&mut *stream).take(room as u64).read_buf(&mut buf).await?;
        if n == 0 {
            return Ok(LineRead::Closed {
                partial: !buf.is_empty(),
            });
        }
        if let Some(i) = memchr::memchr(b'\n', &buf[scanned..]) {
            // The line is gone once its request is prepared (even a Wait keeps
            // none of it), so its buffer's room is not worth a reallocation.
            buf.truncate(scanned + i);
            return Ok(LineRead::Line(buf));
        }
        scanned = buf.len();
    }
}

/// Resolves when the client closes its side (EOF) or the connection breaks.
/// Whatever else it sends meanwhile is discarded (bytes after the line are ignored).
///
/// Every held request (a Wait, for up to 30 min) carries this future, so it
/// keeps nothing across its wait but the stream: the buffer lives only while
/// reading, and readiness is awaited through `poll_read_ready`, whose waker
/// the socket's registration keeps (`readable()` would carry a waiter node of
/// its own, ~150 bytes). Nothing else awaits this stream's reads meanwhile.
pub(crate) async fn client_left(stream: &mut TcpStream) {
    loop {
        if std::future::poll_fn(|cx| stream.poll_read_ready(cx))
            .await
            .is_err()
        {
            return;
        }
        let mut sink = [0u8; 256];
        match stream.try_read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

/// Answers a request: like [`finish`], but after a whole request line, when the
/// client has sent nothing more, closes at once: with no unread input, closing
/// sends a FIN, not a reset, so the answer is safe without the linger — and the
/// connection costs no second wake-up for the client's own FIN. A client that
/// sent more (a flood, bytes after the line) is lingered on as before.
pub(crate) async fn answer(stream: TcpStream, line: &[u8], linger: Duration, whole_line: bool) {
    if whole_line {
        finish_with(stream, line, linger, true).await;
    } else {
        finish(stream, line, linger).await;
    }
}

/// Writes the answer line, shuts the write side, then discards input for at most
/// `linger` before closing: closing with unread input would send a reset that can
/// destroy the answer in the client's receive buffer.
pub(crate) async fn finish(stream: TcpStream, line: &[u8], linger: Duration) {
    finish_with(stream, line, linger, false).await;
}

async fn finish_with(mut stream: TcpStream, line: &[u8], linger: Duration, quick: bool) {
    match tokio::time::timeout(WRITE_TIMEOUT, stream.write_all(line)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::debug!("could not write the answer: {e}");
            return;
        }
        Err(_) => {
            tracing::debug!("client did not read its answer within {WRITE_TIMEOUT:?}");
            return;
        }
    }
    if quick {
        // Asked of the socket itself (not of the reactor's cached readiness, which
        // may not have seen bytes that just arrived).
        let Ok(std_stream) = stream.into_std() else {
            return;
        };
        let mut sink = [0u8; 256];
        match (&std_stream).read(&mut sink) {
            // Nothing unread, or the client already closed its side: closing now
            // sends a FIN after the answer, never a reset.
            Ok(0) => return,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Ok(_) | Err(_) => {}
        }
        // The client sent more: linger as for any other answer.
        stream = match TcpStream::from_std(std_stream) {
            Ok(stream) => stream,
            Err(_) => return,
        };
    }
    let _ = stream.shutdown().await;
    let _ = tokio::time::timeout(linger, client_left(&mut stream)).await;
}

/// Serves a stream: writes each message as the client reads, until the stream
/// ends, the client leaves or the app shuts down (then `"ShuttingDown"`).
///
/// The subscription is pulled only when the previous write completed, so a
/// client that stops reading costs nothing but its socket buffers. Messages that
/// are ready at once are written together (up to [`BATCH_BYTES`]): one write, and
/// one wake-up of the reader, for a burst of changes rather than one per message.
pub(crate) async fn stream<S: Subscription>(
    mut stream: TcpStream,
    mut subscription: S,
    shutdown: &CancellationToken,
) {
    // Many small writes over time: each must leave at once, not wait for the
    // client's (possibly delayed) ACK of the previous one.
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.split();
    let left = async {
        let mut sink = [0u8; 256];
        loop {
            match reader.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::pin!(left);
    let mut batch: Vec<u8> = Vec::new();
    let mut ended = false;
    while !ended {
        let message = tokio::select! {
            biased;
            () = shutdown.cancelled() => StreamLine::Message(StreamMessage::ShuttingDown),
            () = &mut left => return,
            message = subscription.next() => match message {
                Some(message) => message,
                None => break,
            },
        };
        let mut last = message.is_shutting_down();
        batch.clear();
        message.write_to(&mut batch);
        // More messages that are ready now join the same write (polled once; a
        // subscription's `next` is cancel-safe: dropping it loses nothing).
        while !last && batch.len() < BATCH_BYTES && !shutdown.is_cancelled() {
            match subscription.next().now_or_never() {
                Some(Some(message)) => {
                    last = message.is_shutting_down();
                    message.write_to(&mut batch);
                }
                Some(None) => {
                    ended = true;
                    break;
                }
                None => break,
            }
        }
        let written = tokio::select! {
            biased;
            () = &mut left => return,
            written = writer.write_all(&batch) => written,
            // A reader that stopped reading does not hold up the app's shutdown.
            () = async { shutdown.cancelled().await; tokio::time::sleep(Duration::from_secs(1)).await } => return,
        };
        if written.is_err() || last {
            break;
        }
        if batch.capacity() > 4 * BATCH_BYTES {
            // A rare huge message: do not keep its room for the life of the stream.
            batch = Vec::new();
        }
    }
    let _ = writer.shutdown().await;
}

/// Bytes of ready messages gathered into one write, at most (a message that is
/// larger on its own is written whole).
const BATCH_BYTES: usize = 64 * 1024;
