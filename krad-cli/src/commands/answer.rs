//! `krad answer`: decides an agent's open ask.

use krad_bus::protocol::AskAnswer;
use krad_bus::request::answer::Answer;
use serde_json::{Value, json};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::{Exit, Failure};
use crate::print;

/// Arguments of `krad answer`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The first answer wins: a later one exits 8 (conflict) and says who decided.\n\n\
    Examples:\n  krad answer a-3f2a91c0d4e5b6a7 allow\n  krad answer a-77b0c1d2e3f4a5b6 --text \"use SQLite\"\n  \
    krad answer a-9c8d7e6f5a4b3c2d --fields-json '{\"name\":\"krad\"}'"
)]
pub(crate) struct AnswerArgs {
    /// The ask's id (see `krad asks`).
    pub ask: String,
    /// The option to pick (allow, allow-always, deny, or a choice's id).
    pub option: Option<String>,
    /// The answer to a text question.
    #[arg(long, conflicts_with = "option")]
    pub text: Option<String>,
    /// The answer to a form, as a JSON object.
    #[arg(long, value_name = "JSON", conflicts_with_all = ["option", "text"])]
    pub fields_json: Option<String>,
}

/// Sends the answer.
pub(crate) fn run(args: AnswerArgs, connect: &ConnectArgs, json_out: bool) -> anyhow::Result<Exit> {
    let answer = match (&args.option, &args.text, &args.fields_json) {
        (Some(option), None, None) => json!({ "option": option }),
        (None, Some(text), None) => json!({ "text": text }),
        (None, None, Some(fields)) => {
            let fields: Value = serde_json::from_str(fields).map_err(|e| {
                Failure::new(Exit::Usage, format!("--fields-json is not JSON: {e}"))
            })?;
            json!({ "fields": fields })
        }
        _ => {
            return Err(
                Failure::new(Exit::Usage, "give an OPTION, --text or --fields-json").into(),
            );
        }
    };
    let request = Answer {
        ask: args.ask.clone(),
        answer: AskAnswer::from_value(answer),
    };
    let reply = AppConnection::find(connect)?.send(request, None)?;
    print::emit(json_out, &reply, |()| {
        print::line(&format!("answered {}", args.ask));
    });
    Ok(Exit::Success)
}
