//! `CreateWorktree`: a new environment — a git worktree on its own branch.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Call, RequestKind, Rights, deadline};
use crate::protocol::ApiError;
use crate::protocol::EnvironmentInfo;

/// The CreateWorktree request.
///
/// # Format
///
/// ```json
/// {"CreateWorktree":{"name":"fix-login","base":"main","branch":"krad/fix-login"}}
/// {"Environment":{"name":"fix-login","path":"…","branch":"krad/fix-login","base":"3f2a…","kind":"worktree",…}}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateWorktree {
    /// The environment's name (also the worktree's directory name).
    pub name: String,
    /// An environment or a git ref to start from (default: main's HEAD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The branch to create (default `krad/<name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// An SSH host of the config: the worktree is made in the host's repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Whether `name` may name an environment: 1–64 of `[A-Za-z0-9._-]`, not
/// starting with `.` or `-`.
pub fn check_name(request: RequestKind, field: &str, name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(request.invalid(
            field,
            format!(
                "{name:?} is not a name: use 1 to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-'"
            ),
        ))
    }
}

impl Call for CreateWorktree {
    const KIND: RequestKind = RequestKind::CreateWorktree;
    const RIGHTS: Rights = Rights::ClientAndLeads;
    const AT_MOST_ONCE: bool = true;
    type Answer = EnvironmentInfo;

    fn deadline(&self) -> Option<Duration> {
        Some(deadline::LONG)
    }

    fn validate(&self) -> Result<(), ApiError> {
        check_name(Self::KIND, "name", &self.name)?;
        if let Some(branch) = &self.branch
            && (branch.is_empty() || branch.starts_with('-') || branch.contains(['\0', ' ', '\n']))
        {
            return Err(Self::KIND.invalid("branch", format!("{branch:?} is not a branch name")));
        }
        if let Some(base) = &self.base
            && (base.is_empty() || base.starts_with('-') || base.contains('\0'))
        {
            return Err(Self::KIND.invalid("base", format!("{base:?} is not a ref")));
        }
        Ok(())
    }
}
