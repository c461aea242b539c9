//! The CLI's exit codes (section 7 of the contract), and the error that carries one.

use krad_bus::protocol::ErrorCode;

/// Stable exit codes, documented in `krad --help` and the README.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Success.
    Success = 0,
    /// The app answered an error not listed below, or a local failure.
    Failure = 1,
    /// Usage error, or `bad_request`/`invalid`.
    Usage = 2,
    /// `not_found`.
    NotFound = 3,
    /// `unauthorized` or `forbidden`.
    Denied = 4,
    /// `"TimedOut"`.
    TimedOut = 5,
    /// `unsupported_api_version`.
    UnsupportedVersion = 6,
    /// The bus cannot be reached (no api.json, stale api.json, connection refused).
    Unreachable = 7,
    /// `conflict`.
    Conflict = 8,
    /// `krad wait`/`krad code`: the agent or program exited non-zero.
    ProgramFailed = 9,
}

impl Exit {
    /// The exit code for an error the app answered.
    pub fn for_error(code: ErrorCode) -> Exit {
        match code {
            ErrorCode::BadRequest | ErrorCode::Invalid => Exit::Usage,
            ErrorCode::NotFound => Exit::NotFound,
            ErrorCode::Unauthorized | ErrorCode::Forbidden => Exit::Denied,
            ErrorCode::UnsupportedApiVersion => Exit::UnsupportedVersion,
            ErrorCode::Conflict => Exit::Conflict,
            ErrorCode::UnknownRequest
            | ErrorCode::Failed
            | ErrorCode::Unavailable
            | ErrorCode::RequestIdReused
            | ErrorCode::Busy
            | ErrorCode::Internal
            | ErrorCode::Other => Exit::Failure,
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit as u8)
    }
}

/// A failure with the exit code it maps to. Its message is printed as
/// `krad: <message>` on stderr; with `--json`, the app's answer it stands for
/// (an `Error`, `"TimedOut"`), if any, is printed on stdout first.
#[derive(Debug)]
pub(crate) struct Failure {
    /// How the process exits.
    pub exit: Exit,
    /// What went wrong and, where we know, what to do next.
    pub message: String,
    /// The app's answer line, when the failure is one the app answered.
    pub answer: Option<serde_json::Value>,
}

impl Failure {
    /// A failure with an exit code and a message.
    pub(crate) fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            message: message.into(),
            answer: None,
        }
    }

    /// The same failure, standing for the app's answer `answer`.
    pub(crate) fn answered(self, answer: serde_json::Value) -> Failure {
        Failure {
            answer: Some(answer),
            ..self
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The exit-code table, as text for help screens (a macro so `concat!` can use it).
macro_rules! exit_codes_help {
    () => {
        "Exit codes:
  0  success
  1  the app answered an error not listed below, or a local failure
  2  usage error, or the app answered bad_request/invalid
  3  not_found
  4  unauthorized or forbidden
  5  the request timed out (\"TimedOut\")
  6  unsupported_api_version (the app serves another API version)
  7  the bus cannot be reached (no api.json, stale api.json, connection refused)
  8  conflict
  9  krad wait/krad code: the agent or program exited non-zero"
    };
}
pub(crate) use exit_codes_help;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_code_maps_as_section_7_says() {
        let expected = |code| match code {
            ErrorCode::BadRequest | ErrorCode::Invalid => 2,
            ErrorCode::NotFound => 3,
            ErrorCode::Unauthorized | ErrorCode::Forbidden => 4,
            ErrorCode::UnsupportedApiVersion => 6,
            ErrorCode::Conflict => 8,
            _ => 1,
        };
        for code in ErrorCode::ALL {
            assert_eq!(Exit::for_error(code) as u8, expected(code), "{code}");
        }
        assert_eq!(Exit::TimedOut as u8, 5);
        assert_eq!(Exit::Unreachable as u8, 7);
        assert_eq!(Exit::ProgramFailed as u8, 9);
    }
}
