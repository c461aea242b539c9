//! `krad ext ls` (Extensions) and `krad ext call` (ExtensionTool): the MCP
//! servers the config names, and their tools.

use anyhow::Context;
use krad_bus::protocol::ExtensionInfo;
use krad_bus::request::{extension_tool::ExtensionTool, extensions::Extensions};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::connect::{AppConnection, ConnectArgs};
use crate::exit::{Exit, Failure};
use crate::print;
use crate::render::{self, Column};

/// Arguments of `krad ext`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExtArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ExtCommand,
}

/// The subcommands of `krad ext`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ExtCommand {
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
pub(crate) struct ExtLsArgs {
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
pub(crate) struct ExtCallArgs {
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
pub(crate) fn run(args: ExtArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
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
    let reply = AppConnection::find(connect)?.send(Extensions {}, None)?;
    print::emit(json, &reply, |extensions| {
        print::lines(extensions_lines(
            extensions,
            args.tools,
            render::terminal_width(),
        ));
    });
    Ok(Exit::Success)
}

/// The table of `krad ext ls` fitted to `width`, then (`tools`) a line per tool;
/// a hint when there are no extensions.
fn extensions_lines(extensions: &[ExtensionInfo], tools: bool, width: usize) -> Vec<String> {
    if extensions.is_empty() {
        return vec![
            "no extensions (the config names none: add [extensions.NAME] tables)".to_owned(),
        ];
    }
    let rows: Vec<Vec<String>> = extensions
        .iter()
        .map(|extension| {
            let names: Vec<&str> = extension.tools.iter().map(|t| t.name.as_str()).collect();
            let tools = match (&extension.error, names.is_empty()) {
                (Some(error), true) => render::one_line(error),
                (Some(error), false) => {
                    format!("{} ({})", names.join(", "), render::one_line(error))
                }
                (None, true) => "-".to_owned(),
                (None, false) => names.join(", "),
            };
            vec![
                extension.name.clone(),
                render::wire_name(&extension.state),
                extension.restarts.to_string(),
                tools,
            ]
        })
        .collect();
    let mut lines = render::table(&COLUMNS, &rows, width);
    if tools {
        for extension in extensions {
            for tool in &extension.tools {
                let description = tool
                    .description
                    .as_deref()
                    .map(render::one_line)
                    .unwrap_or_default();
                lines.push(render::truncate(
                    &format!("{}.{}  {description}", extension.name, tool.name),
                    width,
                ));
            }
        }
    }
    lines
}

/// An MCP content item, as far as the CLI prints it: text as its lines, any
/// other kind (or a text item it cannot read) as its JSON. Unknown fields and
/// kinds are fine.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Content {
    Text {
        text: String,
    },
    #[serde(other)]
    Other,
}

fn call(args: ExtCallArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let arguments = arguments(args.args_json.as_deref(), args.args)?;
    let request = ExtensionTool {
        extension: args.extension.clone(),
        tool: args.tool.clone(),
        arguments,
    };
    let reply = AppConnection::find(connect)?.send(request, None)?;
    print::emit(json, &reply, |result| {
        for item in &result.content {
            match Content::deserialize(item) {
                Ok(Content::Text { text }) => print::line(text.strip_suffix('\n').unwrap_or(&text)),
                _ => print::json(item),
            }
        }
        if result.truncated {
            eprintln!("krad: the content was cut at the 8 MiB response limit");
        }
    });
    if reply.answer.is_error {
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

    #[test]
    fn content_items_are_read_by_kind_and_tolerate_the_unknown() {
        let text = json!({"type": "text", "text": "hi\n", "annotations": {"x": 1}});
        assert!(
            matches!(Content::deserialize(&text), Ok(Content::Text { text }) if text == "hi\n")
        );
        for other in [
            json!({"type": "image", "data": "AA==", "mimeType": "image/png"}),
            json!({"type": "something-new"}),
        ] {
            assert!(
                matches!(Content::deserialize(&other), Ok(Content::Other)),
                "{other}"
            );
        }
        for unreadable in [
            json!({"type": "text", "text": 7}),
            json!({"text": "no type"}),
        ] {
            assert!(Content::deserialize(&unreadable).is_err(), "{unreadable}");
        }
    }
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
        let list = json!([
            {"name":"github","state":"running","restarts":1,
             "tools":[{"name":"search","description":"Search\nissues","input_schema":{}},
                      {"name":"get_me","description":null,"input_schema":{}}]},
            {"name":"db","state":"failed","restarts":0,"tools":[],
             "error":"it exited (exit code 3) before it answered"},
            {"name":"idle","state":"stopped","tools":[]},
            {"name":"new","state":"hibernating","tools":[],"cost":3},
        ]);
        let list: Vec<ExtensionInfo> = serde_json::from_value(list).unwrap();
        let lines = extensions_lines(&list, false, 100);
        assert_eq!(lines.len(), 5);
        assert!(lines[0].starts_with("NAME"), "{lines:#?}");
        assert!(lines[1].contains("running") && lines[1].contains("search, get_me"));
        assert!(lines[2].contains("failed") && lines[2].contains("exit code 3"));
        assert!(lines[3].contains("stopped") && lines[3].ends_with('-'));
        assert!(lines[4].starts_with("new     ?"), "{lines:#?}");
        let lines = extensions_lines(&list, true, 100);
        assert_eq!(
            lines[5..],
            ["github.search  Search issues", "github.get_me  "]
        );
    }
}
