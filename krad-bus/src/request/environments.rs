//! `Environments`: every environment the app knows.

use serde::{Deserialize, Serialize};

use super::{Call, RequestKind, Rights};
use crate::protocol::EnvironmentInfo;

/// The Environments request (no fields).
///
/// # Format
///
/// ```json
/// "Environments"
/// {"Environments":[{"name":"main","path":"/repo","branch":"main","base":null,"host":null,"kind":"main","group":null,"variant":null,"terminals":[1,2]}]}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environments {}

impl Call for Environments {
    const KIND: RequestKind = RequestKind::Environments;
    const RIGHTS: Rights = Rights::Anyone;
    const AT_MOST_ONCE: bool = false;
    type Answer = Vec<EnvironmentInfo>;
}
