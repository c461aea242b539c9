//! The dialogs that take text: the new-agent form, send, rename, budget,
//! variants, a text or form answer; what each sends once submitted, checked
//! first; and the confirmation a pick's dry run makes.
//!
//! Pure: builds typed requests, never sends them; must never import the
//! terminal or the bus's client.

use krad_bus::protocol::{AskAnswer, AskInfo, Dollars, PickedInfo, ScoresInfo};
use krad_bus::request::answer::Answer;
use krad_bus::request::budget::Budget;
use krad_bus::request::pick_variant::PickVariant;
use krad_bus::request::rename::Rename;
use krad_bus::request::run_variants::RunVariants;
use krad_bus::request::send::Send;
use krad_bus::request::spawn::Spawn;

use super::{Action, Confirm};

/// One line of a form.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    /// What it asks.
    pub(crate) label: &'static str,
    /// What was typed.
    pub(crate) value: String,
    /// What an empty value means.
    pub(crate) hint: String,
}

impl Field {
    fn new(label: &'static str, value: impl Into<String>, hint: impl Into<String>) -> Field {
        Field {
            label,
            value: value.into(),
            hint: hint.into(),
        }
    }
}

/// What a form is for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FormKind {
    /// A new agent.
    Spawn,
    /// Text or keys for a terminal.
    Send(u64),
    /// A terminal's new name.
    Rename(u64),
    /// A cost limit for a terminal or a variant group.
    Budget {
        /// The terminal, or
        target: Option<u64>,
        /// the variant group.
        group: Option<String>,
    },
    /// Variants of one task.
    Variants,
    /// A text answer to an ask.
    AnswerText(String),
    /// A form answer to an ask: the fields' ids in order.
    AnswerFields(String, Vec<String>),
}

/// A form over the list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Form {
    /// What it is for.
    pub(crate) kind: FormKind,
    /// Its title.
    pub(crate) title: String,
    /// Its lines.
    pub(crate) fields: Vec<Field>,
    /// The line typed into.
    pub(crate) focus: usize,
    /// Why the last submit was refused.
    pub(crate) error: Option<String>,
}

impl Form {
    fn new(kind: FormKind, title: impl Into<String>, fields: Vec<Field>) -> Form {
        Form {
            kind,
            title: title.into(),
            fields,
            focus: 0,
            error: None,
        }
    }

    /// The new-agent form, in `environment`.
    pub(crate) fn spawn(environment: &str) -> Form {
        Form::new(
            FormKind::Spawn,
            "New agent",
            vec![
                Field::new("profile", "", "the config's default"),
                Field::new("environment", environment, "main"),
                Field::new("new worktree", "", "none: use the environment"),
                Field::new("name", "", "none"),
                Field::new("prompt", "", "none"),
                Field::new("sandbox", "", "the config's (y/n)"),
            ],
        )
    }

    /// Send to terminal `target`.
    pub(crate) fn send(target: u64) -> Form {
        Form::new(
            FormKind::Send(target),
            format!("Send to terminal {target}"),
            vec![Field::new(
                "text",
                "",
                "Enter sends it and Enter; --key C-c --key Escape sends keys",
            )],
        )
    }

    /// Rename terminal `target`, now named `name`.
    pub(crate) fn rename(target: u64, name: Option<&str>) -> Form {
        Form::new(
            FormKind::Rename(target),
            format!("Rename terminal {target}"),
            vec![Field::new(
                "name",
                name.unwrap_or(""),
                "empty takes the name away",
            )],
        )
    }

    /// A cost limit.
    pub(crate) fn budget(target: Option<u64>, group: Option<String>, now: Option<Dollars>) -> Form {
        let title = match (&target, &group) {
            (Some(t), _) => format!("Budget of terminal {t}"),
            (None, Some(g)) => format!("Budget of variant group {g}"),
            (None, None) => "Budget".to_owned(),
        };
        Form::new(
            FormKind::Budget { target, group },
            title,
            vec![Field::new(
                "max cost USD",
                now.map(|d| format!("{:.2}", d.value())).unwrap_or_default(),
                "empty: no limit",
            )],
        )
    }

    /// Variants of one task.
    pub(crate) fn variants() -> Form {
        Form::new(
            FormKind::Variants,
            "Run variants",
            vec![
                Field::new("count", "2", "1 to 16"),
                Field::new("prompt", "", "the task"),
                Field::new("profile", "", "the config's default"),
                Field::new("group name", "", "generated"),
            ],
        )
    }

    /// An answer to `ask` in text or fields; `None` for an ask with options.
    pub(crate) fn answer(ask: &AskInfo) -> Option<Form> {
        if !ask.options.is_empty() {
            return None;
        }
        let title = format!("Answer: {}", crate::cells::one_line(&ask.title));
        if ask.fields.is_empty() {
            return Some(Form::new(
                FormKind::AnswerText(ask.ask.clone()),
                title,
                vec![Field::new("answer", "", "")],
            ));
        }
        let ids = ask.fields.iter().map(|f| f.id.clone()).collect();
        let fields = ask
            .fields
            .iter()
            .map(|f| Field::new("", "", crate::cells::one_line(&f.label)))
            .collect();
        Some(Form::new(
            FormKind::AnswerFields(ask.ask.clone(), ids),
            title,
            fields,
        ))
    }

    /// Types a character into the focused line.
    pub(crate) fn type_char(&mut self, c: char) {
        if let Some(field) = self.fields.get_mut(self.focus) {
            field.value.push(c);
        }
    }

    /// Deletes the last character of the focused line.
    pub(crate) fn backspace(&mut self) {
        if let Some(field) = self.fields.get_mut(self.focus) {
            field.value.pop();
        }
    }

    /// Empties the focused line.
    pub(crate) fn clear(&mut self) {
        if let Some(field) = self.fields.get_mut(self.focus) {
            field.value.clear();
        }
    }

    /// Moves the focus by `delta` lines, round.
    pub(crate) fn focus_by(&mut self, delta: isize) {
        let n = self.fields.len().max(1) as isize;
        self.focus = (self.focus as isize + delta).rem_euclid(n) as usize;
    }

    fn value(&self, index: usize) -> Option<String> {
        self.fields
            .get(index)
            .map(|f| f.value.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// What the form sends, or why it cannot.
    pub(crate) fn submit(&self) -> Result<Action, String> {
        match &self.kind {
            FormKind::Spawn => {
                let sandbox = match self.value(5).as_deref() {
                    None => None,
                    Some("y" | "yes") => Some(true),
                    Some("n" | "no") => Some(false),
                    Some(other) => return Err(format!("sandbox: y or n, not {other:?}")),
                };
                let new_worktree = self.value(2);
                Ok(Action::Spawn {
                    spawn: Spawn {
                        environment: new_worktree.clone().or_else(|| self.value(1)),
                        profile: self.value(0),
                        name: self.value(3),
                        prompt: self.value(4),
                        sandbox,
                        ..Spawn::default()
                    },
                    new_worktree,
                })
            }
            FormKind::Send(target) => {
                let typed = self.fields.first().map(|f| f.value.as_str()).unwrap_or("");
                send_of(*target, typed).map(Action::Send)
            }
            FormKind::Rename(target) => Ok(Action::Rename(Rename {
                target: *target,
                name: self.value(0),
            })),
            FormKind::Budget { target, group } => {
                let max = match self.value(0) {
                    None => None,
                    Some(text) => {
                        let value: f64 = text
                            .trim_start_matches('$')
                            .parse()
                            .map_err(|_| format!("{text:?} is not an amount of dollars"))?;
                        if !value.is_finite() || value < 0.0 {
                            return Err(format!("{text:?} is not an amount of dollars"));
                        }
                        Some(Dollars::of(value))
                    }
                };
                Ok(Action::Budget(Budget {
                    target: *target,
                    group: group.clone(),
                    max_cost_usd: max,
                }))
            }
            FormKind::Variants => {
                let count = self
                    .value(0)
                    .unwrap_or_default()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=16).contains(n))
                    .ok_or("count: a number from 1 to 16")?;
                let prompt = self.value(1).ok_or("the prompt is missing")?;
                Ok(Action::RunVariants(RunVariants {
                    count,
                    prompt,
                    profile: self.value(2),
                    name: self.value(3),
                    ..RunVariants::default()
                }))
            }
            FormKind::AnswerText(ask) => Ok(Action::Answer(Answer {
                ask: ask.clone(),
                answer: AskAnswer::Text(
                    self.fields
                        .first()
                        .map(|f| f.value.clone())
                        .unwrap_or_default(),
                ),
            })),
            FormKind::AnswerFields(ask, ids) => {
                let fields = ids
                    .iter()
                    .zip(&self.fields)
                    .map(|(id, f)| (id.clone(), serde_json::Value::String(f.value.clone())))
                    .collect();
                Ok(Action::Answer(Answer {
                    ask: ask.clone(),
                    answer: AskAnswer::Fields(fields),
                }))
            }
        }
    }
}

/// The Send of what was typed: `--key NAME` words are keys (tmux's names),
/// the rest is text followed by Enter.
pub(crate) fn send_of(target: u64, typed: &str) -> Result<Send, String> {
    let mut keys = Vec::new();
    let mut text = Vec::new();
    let mut words = typed.split(' ').peekable();
    while let Some(word) = words.next() {
        if word == "--key" {
            let key = words
                .find(|w| !w.is_empty())
                .ok_or("--key needs a key name (Enter, Escape, C-c, …)")?;
            keys.push(key.to_owned());
        } else if let Some(key) = word.strip_prefix("--key=") {
            keys.push(key.to_owned());
        } else {
            text.push(word);
        }
    }
    let text = text.join(" ").trim().to_owned();
    if text.is_empty() && keys.is_empty() {
        return Err("nothing to send".to_owned());
    }
    Ok(Send {
        target,
        enter: (!text.is_empty()).then_some(true),
        text,
        keys: (!keys.is_empty()).then_some(keys),
        ..Send::default()
    })
}

/// The question a pick's dry run asks.
pub(crate) fn pick_confirmation(mut pick: PickVariant, picked: &PickedInfo) -> Confirm {
    let into = picked.into.as_deref().unwrap_or("its base");
    let mut lines = Vec::new();
    if let Some(scores) = &picked.scores {
        lines.extend(score_lines(scores));
        lines.push(String::new());
    }
    lines.push(format!(
        "Pick variant {} of {}: branch {} into {into}",
        picked.variant, picked.group, picked.branch
    ));
    if let Some(dry) = &picked.dry_run {
        lines.push(format!(
            "{} would land{}",
            crate::cells::counted(dry.files.len(), "file"),
            if dry.fast_forward {
                " (fast-forward)"
            } else {
                ""
            }
        ));
        lines.extend(dry.files.iter().take(8).map(|f| format!("  {f}")));
        if dry.files.len() > 8 {
            lines.push(format!("  … and {} more", dry.files.len() - 8));
        }
        if !dry.uncommitted.is_empty() {
            lines.push(format!(
                "uncommitted in the variant (committed first): {}",
                dry.uncommitted.join(", ")
            ));
        }
        if !dry.conflicts.is_empty() {
            lines.push(format!("CONFLICTS: {}", dry.conflicts.join(", ")));
        }
    }
    lines.push(String::new());
    lines.push("The other variants are archived and closed. Pick it?".to_owned());
    pick.dry_run = false;
    // A pick by rule picks the variant shown, not whatever ranks first later.
    pick.best = false;
    pick.variant = picked.variant;
    Confirm {
        lines,
        yes: Action::Pick(pick),
    }
}

/// A pick by rule refused (no variant passed, or a tie): the scoreboard,
/// and the dry run of the first ranked on `y`, to pick it by number.
pub(crate) fn no_best(scores: &ScoresInfo) -> Option<Confirm> {
    let first = *scores.ranking.first()?;
    let mut lines = vec![
        format!(
            "No pick by rule: {}",
            scores.why.as_deref().unwrap_or("no best")
        ),
        format!("Show the dry run of variant {first}, ranked first?"),
        String::new(),
    ];
    lines.extend(score_lines(scores));
    Some(Confirm {
        lines,
        yes: Action::Pick(PickVariant {
            group: scores.group.clone(),
            variant: first,
            dry_run: true,
            ..PickVariant::default()
        }),
    })
}

/// A group's scoreboard in a few lines: best first, each variant's checks,
/// cost, time, diff and conflicts; then the best, or why there is none.
pub(crate) fn score_lines(scores: &ScoresInfo) -> Vec<String> {
    let mut lines = vec![format!(
        "Scores of {} (gating checks, conflicts with the base, cost, time):",
        scores.group
    )];
    for n in &scores.ranking {
        let Some(v) = scores.variants.iter().find(|v| v.variant == *n) else {
            continue;
        };
        let checks = crate::cells::check_outcomes(v, &scores.checks);
        let cost = v
            .tokens
            .as_ref()
            .and_then(|t| t.cost_usd)
            .map_or_else(|| "-".to_owned(), |c| format!("${:.2}", c.value()));
        let time = v.time_ms.map_or_else(
            || "-".to_owned(),
            |ms| format!("{:.1}s", ms as f64 / 1000.0),
        );
        let mut with = Vec::new();
        if !v.conflicts_with_base.is_empty() {
            with.push(format!("base ({} files)", v.conflicts_with_base.len()));
        }
        with.extend(v.conflicts_with.iter().map(|n| format!("#{n}")));
        let conflicts = if with.is_empty() {
            "no conflicts".to_owned()
        } else {
            format!("conflicts {}", with.join(" "))
        };
        lines.push(format!(
            "{}. variant {} {}: {}; {cost}; {time}; {} files +{} -{}; {conflicts}",
            v.rank.unwrap_or(0),
            v.variant,
            v.state.map_or("-", |s| s.as_str()),
            if checks.is_empty() {
                "no checks".to_owned()
            } else {
                checks.join(", ")
            },
            v.files,
            v.added,
            v.removed
        ));
    }
    lines.push(match (scores.best, &scores.why) {
        (Some(best), _) => format!("Best: variant {best}"),
        (None, why) => format!("No best: {}", why.as_deref().unwrap_or("")),
    });
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_splits_keys_from_text() {
        let send = send_of(4, "hello there").unwrap();
        assert_eq!(
            (send.text.as_str(), send.enter, send.keys),
            ("hello there", Some(true), None)
        );
        let send = send_of(4, "--key C-c --key=Escape").unwrap();
        assert_eq!(send.text, "");
        assert_eq!(send.enter, None);
        assert_eq!(send.keys, Some(vec!["C-c".to_owned(), "Escape".to_owned()]));
        assert!(send_of(4, "  ").is_err());
        assert!(send_of(4, "--key").is_err());
    }

    #[test]
    fn forms_check_what_they_send() {
        let mut form = Form::variants();
        form.focus_by(1);
        assert_eq!(form.submit(), Err("the prompt is missing".to_owned()));
        for c in "fix it".chars() {
            form.type_char(c);
        }
        assert!(
            matches!(form.submit(), Ok(Action::RunVariants(r)) if r.count == 2 && r.prompt == "fix it")
        );
        let mut budget = Form::budget(Some(3), None, None);
        budget.type_char('x');
        assert!(budget.submit().is_err());
        budget.clear();
        for c in "$1.5".chars() {
            budget.type_char(c);
        }
        assert!(
            matches!(budget.submit(), Ok(Action::Budget(b)) if b.max_cost_usd == Some(Dollars::of(1.5)))
        );
        let mut spawn = Form::spawn("main");
        spawn.focus_by(-1);
        spawn.type_char('q');
        assert!(spawn.submit().is_err());
    }
}
