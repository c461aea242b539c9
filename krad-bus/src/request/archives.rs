//! `Archives`: the work kept under `refs/krad/archive/`, and `RestoreArchive`:
//! one of them an environment again.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::create_worktree::check_name;
use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::{ApiError, ArchiveInfo, EnvironmentInfo};

/// The Archives request: every `refs/krad/archive/*` ref of the repository
/// (and of each SSH host's, with `host`), newest first; or of one host's.
///
/// # Format
///
/// ```json
/// "Archives"
/// {"Archives":{"host":"gpu"}}
/// {"Archives":[{"name":"fix-login","commit":"3f2a…","date":"2026-12-01T22:40:00+00:00","subject":"krad: archive the uncommitted work of fix-login","uncommitted":true}]}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Archives {
    /// Only this SSH host's archives (default: this machine's and every
    /// configured host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl Call for Archives {
    const KIND: RequestKind = RequestKind::Archives;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = Vec<ArchiveInfo>;
}

/// The RestoreArchive request: a new worktree environment (`as`, default the
/// archive's name) on its own branch at the archived commit; when that commit is
/// krad's "archive the uncommitted work" commit, its changes are uncommitted
/// files again.
///
/// # Format
///
/// ```json
/// {"RestoreArchive":{"name":"fix-login","as":"fix-login-again"}}
/// {"RestoreArchive":{"name":"train","host":"gpu"}}
/// {"Environment":{"name":"fix-login-again","path":"…","branch":"krad/fix-login-again",…}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RestoreArchive {
    /// The archive: `refs/krad/archive/<name>`.
    pub name: String,
    /// The new environment's name (default: the archive's name).
    #[serde(default, rename = "as", skip_serializing_if = "Option::is_none")]
    pub as_name: Option<String>,
    /// The SSH host whose repository has the archive: the environment is made
    /// there (default: this machine's repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl Call for RestoreArchive {
    const KIND: RequestKind = RequestKind::RestoreArchive;
    const RIGHTS: Rights = Rights::ClientAndLeads;
    const AT_MOST_ONCE: bool = true;
    type Answer = EnvironmentInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONG)
    }

    fn validate(&self) -> Result<(), ApiError> {
        // An archive of `name` taken twice is `name-2`: still a name.
        check_name(Self::KIND, "name", &self.name)?;
        if let Some(name) = &self.as_name {
            check_name(Self::KIND, "as", name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_as_is_its_wire_name() {
        let r: RestoreArchive =
            serde_json::from_str(r#"{"name":"fix-login","as":"again"}"#).unwrap();
        assert_eq!(r.as_name.as_deref(), Some("again"));
        assert!(r.validate().is_ok());
        for bad in ["../x", "", "a/b"] {
            let r = RestoreArchive {
                name: bad.into(),
                ..RestoreArchive::default()
            };
            assert!(r.validate().is_err(), "{bad}");
        }
    }
}
