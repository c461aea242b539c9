//! The messages of an Attach stream (section 5): after the envelope line, JSON
//! lines go both ways — [`AttachInput`] from the client, [`AttachMessage`] from
//! the app. Bytes travel as standard base64 (with padding) in `data`.

use serde::{Deserialize, Serialize};

use super::error::{ApiError, ErrorCode};
use crate::request::RequestKind;

/// What the app sends an attached client, one JSON line each.
///
/// # Format
///
/// ```json
/// {"Screen":{"terminal":4,"cols":120,"rows":40,"data":"G1tIG1sySi4uLg=="}}
/// {"Output":{"data":"aGVsbG8NCg=="}}
/// {"Exited":{"terminal":4,"exit_code":0,"signal":null}}
/// "ShuttingDown"
/// {"Error":{"code":"bad_request","message":"Attach: …"}}
/// ```
///
/// `Screen` comes first: escape sequences that redraw the terminal as it is
/// (clear, cells with their attributes, cursor, input modes), for a terminal of
/// `cols` × `rows`; a terminal in tmux also says where (`tmux`), for clients
/// that would rather run `tmux attach`. It comes again, instead of the
/// output it missed, when a client fell too far behind. `Output` follows as the
/// program prints; `Exited` ends the stream when the program ended, and
/// `"ShuttingDown"` when the app stops. `Error` answers a client line that
/// could not be used; the stream goes on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AttachMessage {
    /// The screen now.
    Screen(ScreenInfo),
    /// What the program printed.
    Output(DataInfo),
    /// The program ended; the stream ends.
    Exited(ExitedInfo),
    /// The app is stopping; the stream ends.
    ShuttingDown,
    /// A line from the client was not understood or not done.
    Error(ApiError),
}

impl AttachMessage {
    /// The message as one line of JSON, `\n` included.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_else(|_| b"\"ShuttingDown\"".to_vec());
        line.push(b'\n');
        line
    }

    /// Whether the stream ends after this message.
    pub fn is_last(&self) -> bool {
        matches!(self, AttachMessage::Exited(_) | AttachMessage::ShuttingDown)
    }
}

/// The screen as an attacher first sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenInfo {
    /// The terminal.
    pub terminal: u64,
    /// Its columns.
    pub cols: u16,
    /// Its rows.
    pub rows: u16,
    /// The escape sequences that redraw it, base64.
    pub data: String,
    /// Where the terminal lives in tmux, when it does (`[terminals] host =
    /// "tmux"`): `tmux attach` reaches it there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmux: Option<TmuxInfo>,
}

/// Where a terminal lives in tmux: a window of the app's own server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TmuxInfo {
    /// The server's socket name (`tmux -L`).
    pub socket: String,
    /// The session its window is in.
    pub session: String,
    /// Its window (`@N`).
    pub window: String,
}

/// Bytes, base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataInfo {
    /// Standard base64, with padding.
    pub data: String,
}

/// How the attached program ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitedInfo {
    /// The terminal.
    pub terminal: u64,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
}

/// What an attached client sends, one JSON line each, once it read the first
/// message.
///
/// # Format
///
/// ```json
/// {"Input":{"data":"bHMNCg=="}}
/// {"Resize":{"cols":120,"rows":40}}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttachInput {
    /// Keystrokes (bytes) for the program.
    Input(DataInfo),
    /// The client's terminal size: the terminal takes it (the last client
    /// that resized sets the size).
    Resize(ResizeInfo),
}

/// A terminal size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResizeInfo {
    /// Columns, at least 1.
    pub cols: u16,
    /// Rows, at least 1.
    pub rows: u16,
}

impl AttachInput {
    /// Reads one line from the client: `bad_request` for what is not one of the
    /// messages, `invalid` for a size of 0.
    pub fn parse(line: &[u8]) -> Result<AttachInput, ApiError> {
        let input: AttachInput = serde_json::from_slice(line).map_err(|e| {
            ApiError::bad_request(format!(
                "{}: expected {{\"Input\":{{\"data\":\"<base64>\"}}}} or \
                 {{\"Resize\":{{\"cols\":…,\"rows\":…}}}}: {e}",
                RequestKind::Attach.name()
            ))
        })?;
        if let AttachInput::Resize(size) = &input
            && (size.cols == 0 || size.rows == 0)
        {
            return Err(ApiError::new(
                ErrorCode::Invalid,
                format!(
                    "{}: Resize needs at least 1 column and 1 row",
                    RequestKind::Attach.name()
                ),
            ));
        }
        Ok(input)
    }

    /// The message as one line of JSON, `\n` included.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_forms() {
        let screen = AttachMessage::Screen(ScreenInfo {
            terminal: 4,
            cols: 80,
            rows: 24,
            data: "eA==".into(),
            tmux: None,
        });
        assert_eq!(
            String::from_utf8(screen.to_line()).unwrap(),
            "{\"Screen\":{\"terminal\":4,\"cols\":80,\"rows\":24,\"data\":\"eA==\"}}\n"
        );
        assert_eq!(AttachMessage::ShuttingDown.to_line(), b"\"ShuttingDown\"\n");
        assert!(
            AttachMessage::Exited(ExitedInfo {
                terminal: 1,
                exit_code: Some(0),
                signal: None
            })
            .is_last()
        );
        assert_eq!(
            AttachInput::parse(br#"{"Resize":{"cols":100,"rows":30}}"#).unwrap(),
            AttachInput::Resize(ResizeInfo {
                cols: 100,
                rows: 30
            })
        );
        assert_eq!(
            AttachInput::parse(br#"{"Input":{"data":"eA=="}}"#).unwrap(),
            AttachInput::Input(DataInfo {
                data: "eA==".into()
            })
        );
    }

    #[test]
    fn bad_lines_are_refused() {
        for line in [
            &b"nope"[..],
            br#"{"Teleport":{}}"#,
            br#"{"Resize":{"cols":-1,"rows":2}}"#,
        ] {
            assert_eq!(
                AttachInput::parse(line).unwrap_err().code,
                ErrorCode::BadRequest
            );
        }
        assert_eq!(
            AttachInput::parse(br#"{"Resize":{"cols":0,"rows":2}}"#)
                .unwrap_err()
                .code,
            ErrorCode::Invalid
        );
    }
}
