//! `Environments`: every environment the app knows.

use serde::{Deserialize, Serialize};

use super::Fields;

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

impl Fields for Environments {}
