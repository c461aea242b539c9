//! An Attach connection: after the request line, JSON lines both ways until the
//! program exits, the client leaves or the app stops.
//!
//! One loop owns the connection: it reads the client's lines (each an
//! [`AttachInput`], handed to the [`Attachment`]) and writes the attachment's
//! messages as they come. Lines are at most [`MAX_LINE`] bytes, like the request
//! line; a line that cannot be used is answered with an `Error` message and the
//! stream goes on.

use std::future::Future;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio_util::sync::CancellationToken;

use crate::protocol::{ApiError, AttachInput, AttachMessage, MAX_LINE};
use crate::request::RequestKind;

/// What an Attach connection serves: the app's side of the stream.
pub trait Attachment: Send + 'static {
    /// The next message for the client: `Screen` first, then `Output` as the
    /// program prints, `Exited` last; `None` ends the stream. Cancel-safe: the
    /// bus drops it whenever the client's input comes first.
    fn next(&mut self) -> impl Future<Output = Option<AttachMessage>> + Send;

    /// A message from the client. An error is sent back as an `Error` message.
    fn input(&mut self, input: AttachInput) -> impl Future<Output = Result<(), ApiError>> + Send;
}

/// How long one message may take to reach a client once the app is stopping.
const STOPPING_WRITE: Duration = Duration::from_secs(1);

/// Serves an attachment on its connection.
pub(crate) async fn serve<A: Attachment>(
    stream: TcpStream,
    mut attachment: A,
    shutdown: &CancellationToken,
) {
    // Keystrokes and their echo are small writes that must not wait.
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.into_split();
    let mut input: Vec<u8> = Vec::with_capacity(1024);
    loop {
        // The lines already read, in order.
        while let Some(end) = memchr::memchr(b'\n', &input) {
            let line: Vec<u8> = input.drain(..=end).collect();
            let line = &line[..end];
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let done = match AttachInput::parse(line) {
                Ok(message) => attachment.input(message).await,
                Err(error) => Err(error),
            };
            if let Err(error) = done
                && !write(&mut writer, &AttachMessage::Error(error), shutdown).await
            {
                return;
            }
        }
        if input.len() >= MAX_LINE {
            let error = ApiError::bad_request(format!(
                "{}: a line is longer than {MAX_LINE} bytes (the limit, its \\n included)",
                RequestKind::Attach.name()
            ));
            let _ = write(&mut writer, &AttachMessage::Error(error), shutdown).await;
            break;
        }
        let mut limited = (&mut reader).take((MAX_LINE - input.len()) as u64);
        let message = tokio::select! {
            biased;
            () = shutdown.cancelled() => AttachMessage::ShuttingDown,
            read = limited.read_buf(&mut input) => match read {
                // The client left: its attachment ends.
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            },
            message = attachment.next() => match message {
                Some(message) => message,
                None => break,
            },
        };
        if !write(&mut writer, &message, shutdown).await || message.is_last() {
            break;
        }
    }
    let _ = writer.shutdown().await;
}

/// Writes a message; false when the client is gone (or will not read while the
/// app stops).
async fn write(
    writer: &mut OwnedWriteHalf,
    message: &AttachMessage,
    shutdown: &CancellationToken,
) -> bool {
    let line = message.to_line();
    tokio::select! {
        biased;
        written = writer.write_all(&line) => written.is_ok(),
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(STOPPING_WRITE).await;
        } => false,
    }
}
