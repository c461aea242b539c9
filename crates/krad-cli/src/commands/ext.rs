//! `krad ext ls` (Extensions) and `krad ext call` (ExtensionTool): the MCP
//! servers the config names, and their tools.

use anyhow::Context;
use krad_bus::request::{Request, deadline, extension_tool::ExtensionTool, extensions::Extensions};
use serde_json::{Map, Value};

use crate::connect::{Bus, ConnectArgs};
use crate::exit::{Exit, Failure};
use crate::output;
use crate::render::{self, Column};

/// Arguments of `krad ext`.
#[derive(Debug, clap::Args)]
pub struct ExtArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ExtCommand,
}

/// The subcommands of `krad ext`.
#[derive(Debug, clap::Subcommand)]
pub enum ExtCommand {
    /// List the extensions, their state and their tools (Extensions; starts nothing).
    Ls(ExtLsArgs),
    /// Call a tool of an extension, starting its server if needed (ExtensionTool).
    Call(ExtCallArgs),
}

/// Arguments of `krad ext ls`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
STATE is stopped (not used yet: servers start on their first call, so a stopped one lists no \
tools), running, or failed (with the reason; the next call starts it again, after a backoff \
when it keeps failing). RESTARTS counts the starts after the first.

Examples:
  krad ext ls
  krad ext ls --tools
  krad ext ls --json | jq '.Extensions[] | select(.state == \"failed\") | .error'")]
pub struct ExtLsArgs {
    /// Also list every tool with its description.
    #[arg(long)]
    pub tools: bool,
}

/// Arguments of `krad ext call`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Arguments: --arg KEY=VALUE (repeatable) takes VALUE as JSON when it parses (42, true, \
[1,2], {\"a\":1}, \"quoted\"), as a string otherwise; --args-json gives them all as one JSON \
object (--arg entries are added to it). Text content is printed as text, any other content \
item as one line of JSON.

Exit codes: 0 when the tool answered, 1 when it answered with is_error (its content is still \
printed), 3 for an unknown extension or tool, 1 when the server cannot be reached (unavailable, \
worth retrying).

Examples:
  krad ext call github search_issues --arg q='is:open label:bug' --arg per_page=5
  krad ext call db query --args-json '{\"sql\":\"select 1\"}'
  krad ext call github get_me --json | jq '.ToolResult.content'")]
pub struct ExtCallArgs {
    /// The extension's name in the config.
    #[arg(value_name = "EXT")]
    pub extension: String,
    /// The tool.
    #[arg(value_name = "TOOL")]
    pub tool: String,
    /// One argument, KEY=VALUE (VALUE as JSON when it parses, else a string).
    #[arg(long = "arg", value_name = "KEY=VALUE", value_parser = parse_arg)]
    pub args: Vec<(String, Value)>,
    /// All arguments as one JSON object.
    #[arg(long, value_name = "JSON")]
    pub args_json: Option<String>,
}

/// Runs `krad ext …`.
pub fn run(args: ExtArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    match args.command {
        ExtCommand::Ls(args) => ls(args, connect, json),
        ExtCommand::Call(args) => call(args, connect, json),
    }
}

/// The table's columns; TOOLS takes the width that is left.
const COLUMNS: [Column; 4] = [
    Column::new("NAME", 4, 24),
    Column::new("STATE", 5, 8),
    Column::new("RESTARTS", 8, 8),
    Column::new("TOOLS", 0, usize::MAX),
];

fn ls(args: ExtLsArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let bus = Bus::find(connect)?;
    let request = Request::Extensions(Extensions {});
    let deadline = request.deadline().unwrap_or(deadline::STANDARD);
    let answer = bus.call(&request.to_value(), None, deadline)?;
    if json {
        output::json(&answer);
        return Ok(Exit::Success);
    }
    let Some(extensions) = answer.get("Extensions").and_then(Value::as_array) else {
        return Err(Failure::new(
            Exit::Failure,
            format!("unexpected answer to Extensions: {answer}"),
        )
        .into());
    };
    if extensions.is_empty() {
        output::line("no extensions (the config names none: add [extensions.NAME] tables)");
        return Ok(Exit::Success);
    }
    for line in extensions_table(extensions, render::terminal_width()) {
        output::line(&line);
    }
    if args.tools {
        for extension in extensions {
            let name = extension["name"].as_str().unwrap_or("?");
            for tool in extension["tools"].as_array().into_iter().flatten() {
                let description = tool["description"]
                    .as_str()
                    .map(render::one_line)
                    .unwrap_or_default();
                output::line(&render::truncate(
                    &format!(
                        "{name}.{}  {description}",
                        tool["name"].as_str().unwrap_or("?")
                    ),
                    render::terminal_width(),
                ));
            }
        }
    }
    Ok(Exit::Success)
}

/// The table of `krad ext ls`, fitted to `width`.
fn extensions_table(extensions: &[Value], width: usize) -> Vec<String> {
    let rows: Vec<Vec<String>> = extensions
        .iter()
        .map(|extension| {
            let tools: Vec<&str> = extension["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str())
                .collect();
            let tools = match (extension["error"].as_str(), tools.is_empty()) {
                (Some(error), true) => render::one_line(error),
                (Some(error), false) => {
                    format!("{} ({})", tools.join(", "), render::one_line(error))
                }
                (None, true) => "-".to_owned(),
                (None, false) => tools.join(", "),
            };
            vec![
                extension["name"].as_str().unwrap_or("?").to_owned(),
                extension["state"].as_str().unwrap_or("?").to_owned(),
                extension["restarts"].as_u64().unwrap_or(0).to_string(),
                tools,
            ]
        })
        .collect();
    render::table(&COLUMNS, &rows, width)
}

fn call(args: ExtCallArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let arguments = arguments(args.args_json.as_deref(), args.args)?;
    let bus = Bus::find(connect)?;
    let request = Request::ExtensionTool(ExtensionTool {
        extension: args.extension.clone(),
        tool: args.tool.clone(),
        arguments,
    });
    let deadline = request.deadline().unwrap_or(deadline::LONGEST);
    let answer = bus.call(&request.to_value(), None, deadline)?;
    let Some(result) = answer.get("ToolResult") else {
        return Err(Failure::new(
            Exit::Failure,
            format!("unexpected answer to ExtensionTool: {answer}"),
        )
        .into());
    };
    let is_error = result["is_error"].as_bool().unwrap_or(false);
    if json {
        output::json(&answer);
    } else {
        for item in result["content"].as_array().into_iter().flatten() {
            match (item["type"].as_str(), item["text"].as_str()) {
                (Some("text"), Some(text)) => output::line(text.strip_suffix('\n').unwrap_or(text)),
                _ => output::json(item),
            }
        }
        if result["truncated"].as_bool() == Some(true) {
            eprintln!("krad: the content was cut at the 8 MiB response limit");
        }
    }
    if is_error {
        eprintln!(
            "krad: tool {:?} of extension {:?} reported an error",
            args.tool, args.extension
        );
        return Ok(Exit::Failure);
    }
    Ok(Exit::Success)
}

/// The arguments object: `--args-json`, then every `--arg` on top.
fn arguments(
    json: Option<&str>,
    pairs: Vec<(String, Value)>,
) -> anyhow::Result<Map<String, Value>> {
    let mut arguments = match json {
        Some(text) => match serde_json::from_str::<Value>(text)
            .context("--args-json is not JSON")
            .map_err(|e| Failure::new(Exit::Usage, format!("{e:#}")))?
        {
            Value::Object(map) => map,
            other => {
                return Err(Failure::new(
                    Exit::Usage,
                    format!("--args-json must be a JSON object, not {other}"),
                )
                .into());
            }
        },
        None => Map::new(),
    };
    for (key, value) in pairs {
        arguments.insert(key, value);
    }
    Ok(arguments)
}

/// Parses `KEY=VALUE`: VALUE as JSON when it parses, else as a string.
fn parse_arg(text: &str) -> Result<(String, Value), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))?;
    if key.is_empty() {
        return Err(format!("{text:?} has no KEY before ="));
    }
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
    Ok((key.to_owned(), value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arg_values_are_json_when_they_parse() {
        assert_eq!(parse_arg("n=42"), Ok(("n".into(), json!(42))));
        assert_eq!(parse_arg("ok=true"), Ok(("ok".into(), json!(true))));
        assert_eq!(
            parse_arg("q=is:open bug"),
            Ok(("q".into(), json!("is:open bug")))
        );
        assert_eq!(parse_arg("s=\"42\""), Ok(("s".into(), json!("42"))));
        assert_eq!(
            parse_arg("o={\"a\":[1]}"),
            Ok(("o".into(), json!({"a":[1]})))
        );
        assert_eq!(parse_arg("e="), Ok(("e".into(), json!(""))));
        assert_eq!(parse_arg("k=a=b"), Ok(("k".into(), json!("a=b"))));
        assert!(parse_arg("novalue").is_err());
        assert!(parse_arg("=1").is_err());
    }

    #[test]
    fn args_json_then_args_on_top() {
        let map = arguments(
            Some(r#"{"a":1,"b":2}"#),
            vec![("b".into(), json!(3)), ("c".into(), json!("x"))],
        )
        .unwrap();
        assert_eq!(Value::Object(map), json!({"a":1,"b":3,"c":"x"}));
        assert!(arguments(Some("[1]"), vec![]).is_err());
        assert!(arguments(Some("{"), vec![]).is_err());
    }

    #[test]
    fn a_row_per_extension() {
        let list = vec![
            json!({"name":"github","state":"running","restarts":1,
                   "tools":[{"name":"search"},{"name":"get_me"}]}),
            json!({"name":"db","state":"failed","restarts":0,"tools":[],
                   "error":"it exited (exit code 3) before it answered"}),
            json!({"name":"idle","state":"stopped","tools":[]}),
        ];
        let lines = extensions_table(&list, 100);
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("NAME"), "{lines:#?}");
        assert!(lines[1].contains("running") && lines[1].contains("search, get_me"));
        assert!(lines[2].contains("failed") && lines[2].contains("exit code 3"));
        assert!(lines[3].contains("stopped") && lines[3].ends_with('-'));
    }
}
