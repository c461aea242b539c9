//! A TARGET argument: a terminal id (`4`), or an agent's name (`fix-login`,
//! as `krad ls` shows it in NAME), found among the app's agents (List) when
//! the command runs. A name several agents share is refused with their ids.

use krad_bus::request::list::List;

use crate::connect::AppConnection;
use crate::exit::{Exit, Failure};

/// What a TARGET argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A terminal id: digits only.
    Id(u64),
    /// An agent's name: anything else.
    Name(String),
}

/// Parses a TARGET: digits are a terminal id (a positive integer), anything
/// else an agent's name.
pub(crate) fn parse_target(text: &str) -> Result<Target, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(
            "an empty TARGET: give a terminal id or an agent's name, as `krad ls` shows them"
                .to_owned(),
        );
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(Target::Name(text.to_owned()));
    }
    text.parse::<u64>()
        .ok()
        .filter(|&id| id > 0)
        .map(Target::Id)
        .ok_or_else(|| {
            format!("{text:?} is not a terminal id (a positive integer, as `krad ls` shows)")
        })
}

impl Target {
    /// The terminal id: its own, or that of the one agent with its name.
    pub(crate) fn resolve(&self, app: &AppConnection) -> Result<u64, Failure> {
        match self {
            Target::Id(id) => Ok(*id),
            Target::Name(_) => {
                let ids = resolve_all(std::slice::from_ref(self), app)?;
                ids.first().copied().ok_or_else(|| {
                    Failure::new(Exit::Failure, "a name was looked up and gave no id")
                })
            }
        }
    }
}

/// The terminal ids of `targets`, in order; the app's agents are listed once,
/// and only when a name is among them.
pub(crate) fn resolve_all(targets: &[Target], app: &AppConnection) -> Result<Vec<u64>, Failure> {
    if targets.iter().all(|t| matches!(t, Target::Id(_))) {
        return Ok(ids_of(targets, &[]).unwrap_or_default());
    }
    let agents = app.send(List { environment: None }, None)?.answer;
    let named: Vec<(u64, Option<&str>)> = agents
        .iter()
        .map(|a| (a.terminal, a.name.as_deref()))
        .collect();
    ids_of(targets, &named)
}

/// Each target's id among `agents` (terminal id and name).
fn ids_of(targets: &[Target], agents: &[(u64, Option<&str>)]) -> Result<Vec<u64>, Failure> {
    targets
        .iter()
        .map(|target| match target {
            Target::Id(id) => Ok(*id),
            Target::Name(name) => {
                let ids: Vec<u64> = agents
                    .iter()
                    .filter(|(_, n)| *n == Some(name.as_str()))
                    .map(|(id, _)| *id)
                    .collect();
                match ids[..] {
                    [id] => Ok(id),
                    [] => Err(Failure::new(
                        Exit::NotFound,
                        format!(
                            "no agent is named {name:?} (`krad ls` shows the agents' ids and names)"
                        ),
                    )),
                    _ => {
                        let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
                        Err(Failure::new(
                            Exit::Usage,
                            format!(
                                "{} agents are named {name:?} (terminals {}): give the id",
                                ids.len(),
                                ids.join(", ")
                            ),
                        ))
                    }
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_an_id_and_anything_else_a_name() {
        assert_eq!(parse_target("4"), Ok(Target::Id(4)));
        assert_eq!(parse_target(" 12 "), Ok(Target::Id(12)));
        assert!(parse_target("0").is_err());
        assert!(parse_target("").is_err());
        assert!(parse_target("99999999999999999999999").is_err());
        assert_eq!(parse_target("-1"), Ok(Target::Name("-1".into())));
        assert_eq!(
            parse_target("fix-login"),
            Ok(Target::Name("fix-login".into()))
        );
    }

    #[test]
    fn a_name_is_its_one_agent_s_id_or_refused() {
        let agents = [
            (1, Some("web")),
            (2, Some("api")),
            (3, Some("api")),
            (4, None),
        ];
        let name = |n: &str| Target::Name(n.to_owned());
        assert_eq!(
            ids_of(&[name("web"), Target::Id(9)], &agents).unwrap(),
            [1, 9]
        );
        let missing = ids_of(&[name("db")], &agents).unwrap_err();
        assert_eq!(missing.exit, Exit::NotFound);
        assert!(
            missing.message.contains("no agent is named \"db\""),
            "{}",
            missing.message
        );
        let shared = ids_of(&[name("api")], &agents).unwrap_err();
        assert_eq!(shared.exit, Exit::Usage);
        assert!(
            shared.message.contains("terminals 2, 3"),
            "{}",
            shared.message
        );
    }
}
