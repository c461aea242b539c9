//! `krad ask`: a program in a krad terminal asks the user a question (Ask) and
//! prints the answer — a choice's option, a text, a form's values or a
//! permission's verdict — for a script to read. Never imports the app.

use krad_bus::protocol::{AskAnswer, DecidedBy};
use krad_bus::request::ask::{Ask, AskField, AskKind, AskOption, AskTool};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::{Exit, Failure};
use crate::print;

/// Arguments of `krad ask`. What kind of answer is wanted is always said:
/// options, a text, fields or a permission.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("kind").required(true).multiple(true)
    .args(["options", "text", "fields", "permission"])))]
#[command(after_help = "\
Run inside a krad terminal: the terminal asks about itself, shows `asking` until the ask \
is decided (krad asks, krad answer, the page, the phone), and the answer is printed on \
stdout: the option's id, the text, a form's values as KEY=VALUE lines, or a permission's \
allow / allow-always / deny. Exit 0 once answered, 5 when the ask expired unanswered.

Examples:
  db=$(krad ask 'Which database?' --option pg=Postgres --option lite=SQLite)
  name=$(krad ask 'What is the release called?' --text)
  krad ask 'Where to deploy?' --field host=Host --field port=Port
  [ \"$(krad ask --permission Bash --input '{\"command\":\"rm -rf build\"}')\" = deny ] && exit 1")]
pub(crate) struct AskArgs {
    /// The question.
    #[arg(value_name = "QUESTION", required_unless_present = "permission")]
    pub question: Option<String>,
    /// An option of a choice, ID=LABEL (or ID); repeat for each.
    #[arg(long = "option", value_name = "ID=LABEL", value_parser = parse_pair)]
    pub options: Vec<(String, String)>,
    /// Ask for a free text.
    #[arg(long, conflicts_with_all = ["options", "fields", "permission"])]
    pub text: bool,
    /// A field of a form, ID=LABEL (or ID); repeat for each.
    #[arg(long = "field", value_name = "ID=LABEL", value_parser = parse_pair,
          conflicts_with_all = ["options", "permission"])]
    pub fields: Vec<(String, String)>,
    /// Ask permission to use this tool (Bash, Edit, …).
    #[arg(long, value_name = "TOOL", conflicts_with = "options")]
    pub permission: Option<String>,
    /// With --permission: the tool's input, as JSON.
    #[arg(long, value_name = "JSON", requires = "permission", value_parser = parse_json)]
    pub input: Option<serde_json::Value>,
    /// How long the ask stays open (seconds, or 90s, 10m; default 600, at most 1800).
    #[arg(long, value_name = "SECS", value_parser = super::wait::parse_wait_secs)]
    pub expires: Option<u64>,
}

/// `id=label`, or `id` alone (its own label).
fn parse_pair(text: &str) -> Result<(String, String), String> {
    let (id, label) = text.split_once('=').unwrap_or((text, text));
    if id.is_empty() {
        return Err("an id before the = (ID=LABEL)".to_owned());
    }
    Ok((id.to_owned(), label.to_owned()))
}

fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

/// Sends Ask, waits for its decision, and prints the answer.
pub(crate) fn run(args: AskArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let request = ask_request(args);
    let reply = AppConnection::find(connect)?.send(request, None)?;
    let answered = &reply.answer;
    if answered.by == DecidedBy::Timeout || matches!(answered.answer, AskAnswer::Nothing) {
        if json {
            print::json(&reply.raw);
        }
        return Err(Failure::new(
            Exit::TimedOut,
            format!("nobody answered ask {} before it expired", answered.ask),
        )
        .into());
    }
    if json {
        print::json(&reply.raw);
        return Ok(Exit::Success);
    }
    match &answered.answer {
        AskAnswer::Option(option) => print::line(option),
        AskAnswer::Text(text) => print::line(text),
        AskAnswer::Fields(values) => {
            for (key, value) in values {
                let value = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                print::line(&format!("{key}={value}"));
            }
        }
        AskAnswer::Nothing => {}
        AskAnswer::Unreadable(value) => print::line(&value.to_string()),
    }
    Ok(Exit::Success)
}

/// The Ask the arguments describe.
fn ask_request(args: AskArgs) -> Ask {
    let pairs = |pairs: Vec<(String, String)>| pairs.into_iter();
    let (kind, tool) = match (&args.permission, args.text) {
        (Some(tool), _) => (
            AskKind::Permission,
            Some(AskTool {
                name: tool.clone(),
                input: args.input.clone().unwrap_or_default(),
            }),
        ),
        (None, true) => (AskKind::Text, None),
        (None, false) if !args.fields.is_empty() => (AskKind::Form, None),
        (None, false) => (AskKind::Choice, None),
    };
    Ask {
        kind,
        tool,
        tool_call_id: None,
        title: args.question,
        options: (!args.options.is_empty()).then(|| {
            pairs(args.options)
                .map(|(id, label)| AskOption { id, label })
                .collect()
        }),
        fields: (!args.fields.is_empty()).then(|| {
            pairs(args.fields)
                .map(|(id, label)| AskField { id, label })
                .collect()
        }),
        expires_in_secs: args.expires,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_fields_are_id_equals_label() {
        assert_eq!(
            parse_pair("pg=Postgres").unwrap(),
            ("pg".into(), "Postgres".into())
        );
        assert_eq!(parse_pair("pg").unwrap(), ("pg".into(), "pg".into()));
        assert!(parse_pair("=x").is_err());
    }
}
