//! Extensions and ExtensionTool against a real MCP server over stdio: the
//! `krad-mcp-fixture` binary (krad-mcp-fixture/), built by
//! `cargo test --workspace` next to this suite's executable.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{App, Launch, code, exit_code, stderr, stdout};

/// The fixture server: target/<profile>/krad-mcp-fixture, beside deps/suite-….
pub(crate) fn fixture() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("krad-mcp-fixture");
    assert!(
        path.exists(),
        "{} is missing: run the suite with `cargo test --workspace`, or build it first \
         with `cargo build -p krad-mcp-fixture`",
        path.display()
    );
    path
}

/// A config naming the fixture as extension `fx`, with extra arguments.
fn config(args: &[&str]) -> String {
    format!(
        "[extensions.fx]\ncommand = {:?}\nargs = {}\n",
        fixture().display().to_string(),
        serde_json::to_string(args).unwrap()
    )
}

/// A fresh directory for the fixture's markers.
fn marker_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn start(args: &[&str]) -> App {
    App::start_config(&config(args))
}

fn call(app: &App, tool: &str, arguments: Value) -> Value {
    app.request(json!({"ExtensionTool": {"extension": "fx", "tool": tool, "arguments": arguments}}))
}

fn extension(app: &App) -> Value {
    let answer = app.request(json!("Extensions"));
    let list = answer["Extensions"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(list.len(), 1, "{answer}");
    list[0].clone()
}

fn wait_for(path: &Path, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    path.exists()
}

#[test]
fn listing_starts_nothing_and_a_call_starts_the_server_and_lists_its_tools() {
    let app = start(&[]);
    let before = extension(&app);
    assert_eq!(before["name"], "fx");
    assert_eq!(before["state"], "stopped");
    assert_eq!(before["tools"], json!([]));

    let answer = call(&app, "echo", json!({"text": "hello"}));
    // rmcp's server writes isError; the answer passes it on beside is_error.
    assert_eq!(
        answer,
        json!({"ToolResult": {
            "content": [{"type": "text", "text": "hello"}], "is_error": false, "isError": false
        }})
    );
    let after = extension(&app);
    assert_eq!(after["state"], "running", "{after}");
    assert_eq!(after["restarts"], 0);
    assert!(after.get("error").is_none(), "{after}");
    let tools = after["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, krad_mcp_fixture::TOOL_NAMES);
    assert_eq!(tools[0]["description"], "Answers the text it is given");
    assert_eq!(tools[0]["input_schema"]["required"], json!(["text"]));
}

#[test]
fn a_tool_error_is_an_answer_with_is_error_and_its_content() {
    let app = start(&[]);
    let answer = call(&app, "fail", json!({"message": "no such row"}));
    assert_eq!(answer["ToolResult"]["is_error"], true, "{answer}");
    assert_eq!(answer["ToolResult"]["content"][0]["text"], "no such row");
    let mixed = call(&app, "mixed", json!({}));
    let content = mixed["ToolResult"]["content"].as_array().unwrap();
    assert_eq!(content[1]["type"], "image");
    assert_eq!(content[1]["mimeType"], "image/png");
}

/// The ToolResult the fixture's `annotated` tool must come back as: its result
/// member for member, the contract's `is_error` beside them.
fn annotated_answer() -> Value {
    let mut result = krad_mcp_fixture::annotated();
    result["is_error"] = json!(false);
    json!({ "ToolResult": result })
}

/// Whether JSON text has member `key` with exactly the number text `number`.
fn carries(text: &str, key: &str, number: &str) -> bool {
    let member = format!("\"{key}\":{number}");
    [",", "}"]
        .iter()
        .any(|end| text.contains(&format!("{member}{end}")))
}

#[test]
fn a_tool_result_reaches_the_caller_as_the_server_gave_it() {
    let app = start(&[]);
    // The answer line as the app wrote it, not a float parsed back.
    let envelope = app.envelope(json!({"ExtensionTool": {
        "extension": "fx", "tool": "annotated", "arguments": {}
    }}));
    let mut request = serde_json::to_vec(&envelope).unwrap();
    request.push(b'\n');
    let line = app.send_raw(&request);
    assert!(carries(&line, "priority", "0.7"), "{line}");
    assert!(carries(&line, "ratio", "0.7"), "{line}");
    assert!(!line.contains("0.69999"), "{line}");
    assert!(line.contains(r#""x-extra":{"kept":true}"#), "{line}");
    let answer: Value = serde_json::from_str(line.trim_end()).unwrap();
    assert_eq!(answer, annotated_answer());

    // Through the CLI: --json prints the answer as it came, the text as text.
    let printed = app.krad_ok(&["ext", "call", "fx", "annotated", "--json"]);
    assert!(carries(&printed, "priority", "0.7"), "{printed}");
    assert!(!printed.contains("0.69999"), "{printed}");
    let answer: Value = serde_json::from_str(printed.trim()).unwrap();
    assert_eq!(answer, annotated_answer());
    let human = app.krad(&["ext", "call", "fx", "annotated"]);
    assert_eq!(exit_code(&human), 0, "{}", stderr(&human));
    assert_eq!(stdout(&human).lines().next(), Some("annotated"));
}

#[test]
fn results_that_are_not_tool_results_fail_the_call_and_others_pass_as_given() {
    let app = start(&[]);
    for (result, says) in [
        (json!("just text"), "not an object"),
        (json!(null), "not an object"),
        (json!([{"type": "text", "text": "x"}]), "not an object"),
        (json!({"content": {"type": "text", "text": "x"}}), "content"),
        (json!({"content": [1, 2]}), "content item 0"),
        (json!({"content": [{"text": "no type"}]}), "content item 0"),
        (json!({"content": [], "isError": "yes"}), "isError"),
        (
            json!({"resultType": "input_required", "inputRequests": {}}),
            "resultType",
        ),
    ] {
        let answer = call(&app, "raw", json!({"result": result}));
        assert_eq!(code(&answer), "failed", "{result} gave {answer}");
        assert_eq!(
            answer["Error"]["detail"],
            json!({"extension": "fx", "tool": "raw"}),
            "{answer}"
        );
        let message = answer["Error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(r#"extension "fx": the call to "raw" failed: "#)
                && message.contains(says),
            "{result} gave {message}"
        );
    }
    // What MCP allows passes as it came: no content at all, a kind of content
    // this build does not know, a tool error with structured content.
    let empty = call(&app, "raw", json!({"result": {}}));
    assert_eq!(
        empty,
        json!({"ToolResult": {"content": [], "is_error": false}})
    );
    let future = json!({"type": "x-future", "payload": {"a": 0.1, "b": [1e-7]}});
    let answer = call(&app, "raw", json!({"result": {"content": [future]}}));
    assert_eq!(answer["ToolResult"]["content"], json!([future]), "{answer}");
    let failed = call(
        &app,
        "raw",
        json!({"result": {"content": [], "structuredContent": null, "isError": true}}),
    );
    assert_eq!(
        failed,
        json!({"ToolResult": {
            "content": [], "is_error": true, "structuredContent": null, "isError": true
        }})
    );
    // The session is none the worse.
    assert_eq!(
        call(&app, "echo", json!({"text": "still"}))["ToolResult"]["content"][0]["text"],
        "still"
    );
}

#[test]
fn unknown_tools_and_extensions_are_not_found() {
    let app = start(&[]);
    let tool = call(&app, "nope", json!({}));
    assert_eq!(code(&tool), "not_found", "{tool}");
    assert_eq!(
        tool["Error"]["detail"],
        json!({"extension": "fx", "tool": "nope"})
    );
    assert!(tool["Error"]["message"].as_str().unwrap().contains("echo"));
    let ext = app.request(json!({"ExtensionTool": {"extension": "nope", "tool": "echo"}}));
    assert_eq!(code(&ext), "not_found", "{ext}");
    assert_eq!(ext["Error"]["detail"]["extension"], "nope");
}

#[test]
fn a_server_that_crashes_mid_call_fails_the_call_and_is_restarted_by_the_next() {
    let app = start(&[]);
    assert_eq!(
        call(&app, "echo", json!({"text": "one"}))["ToolResult"]["is_error"],
        false
    );
    let crashed = call(&app, "crash", json!({"code": 5}));
    assert_eq!(code(&crashed), "unavailable", "{crashed}");
    assert_eq!(crashed["Error"]["retryable"], true);
    let failed = extension(&app);
    assert_eq!(failed["state"], "failed", "{failed}");
    assert!(failed["error"].as_str().is_some(), "{failed}");

    let again = call(&app, "echo", json!({"text": "two"}));
    assert_eq!(again["ToolResult"]["content"][0]["text"], "two", "{again}");
    let restarted = extension(&app);
    assert_eq!(restarted["state"], "running", "{restarted}");
    assert_eq!(restarted["restarts"], 1);
    assert!(restarted.get("error").is_none());
}

#[test]
fn a_server_that_never_starts_is_unavailable_and_failed() {
    let app = start(&["--exit-at-once"]);
    let answer = call(&app, "echo", json!({"text": "x"}));
    assert_eq!(code(&answer), "unavailable", "{answer}");
    assert_eq!(answer["Error"]["retryable"], true);
    assert_eq!(answer["Error"]["detail"]["extension"], "fx");
    let message = answer["Error"]["message"].as_str().unwrap();
    assert!(message.contains("exit code 7"), "{message}");
    let state = extension(&app);
    assert_eq!(state["state"], "failed");
    assert!(
        state["error"].as_str().unwrap().contains("exit code 7"),
        "{state}"
    );
    assert_eq!(state["tools"], json!([]));
}

#[test]
fn calls_to_one_server_run_at_once() {
    let app = start(&[]);
    // Start the server first, so that only the calls are timed.
    assert_eq!(
        call(&app, "echo", json!({"text": "up"}))["ToolResult"]["is_error"],
        false
    );
    let started = Instant::now();
    std::thread::scope(|scope| {
        let calls: Vec<_> = (0..5)
            .map(|i| {
                let app = &app;
                scope.spawn(move || call(app, "slow", json!({"ms": 1000, "id": format!("c{i}")})))
            })
            .collect();
        for call in calls {
            let answer = call.join().unwrap();
            assert_eq!(
                answer["ToolResult"]["content"][0]["text"], "slept 1000",
                "{answer}"
            );
        }
    });
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(4000),
        "5 calls of 1 s took {took:?}"
    );
}

#[test]
fn a_call_whose_client_leaves_is_cancelled_on_the_server() {
    let markers = marker_dir();
    let app = start(&["--marker-dir", markers.path().to_str().unwrap()]);
    let mut stream = app.connect();
    let envelope = app.envelope(json!({"ExtensionTool": {
        "extension": "fx", "tool": "slow", "arguments": {"ms": 30000, "id": "left"}
    }}));
    let mut line = serde_json::to_vec(&envelope).unwrap();
    line.push(b'\n');
    stream.write_all(&line).unwrap();
    assert!(
        wait_for(
            &markers.path().join("left.started"),
            Duration::from_secs(20)
        ),
        "the call never started"
    );
    drop(stream);
    assert!(
        wait_for(
            &markers.path().join("left.cancelled"),
            Duration::from_secs(10)
        ),
        "the server was not told that the call was cancelled"
    );
    assert!(!markers.path().join("left.completed").exists());
    // The session survives a cancelled call.
    assert_eq!(
        call(&app, "echo", json!({"text": "still"}))["ToolResult"]["content"][0]["text"],
        "still"
    );
}

#[test]
fn a_servers_stderr_goes_to_the_log_not_to_the_client() {
    let config = config(&["--stderr", "fixture-stderr-line-4711"]);
    let app = App::launch(Launch {
        config: Some(&config),
        rust_log: "warn,krad_ext=info",
        ..Launch::default()
    });
    let answer = call(&app, "echo", json!({"text": "x"}));
    assert!(!answer.to_string().contains("fixture-stderr-line-4711"));
    let until = Instant::now() + Duration::from_secs(10);
    while !app.log().contains("fixture-stderr-line-4711") {
        assert!(Instant::now() < until, "not in the log:\n{}", app.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn content_over_the_response_limit_is_cut_and_marked() {
    let app = start(&[]);
    let answer = call(&app, "big", json!({"bytes": 9 * 1024 * 1024}));
    let result = &answer["ToolResult"];
    assert_eq!(result["truncated"], true, "{}", code(&answer));
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.len() < 8 * 1024 * 1024 && text.len() > 7 * 1024 * 1024,
        "{}",
        text.len()
    );
    let small = call(&app, "big", json!({"bytes": 10}));
    assert!(small["ToolResult"].get("truncated").is_none(), "{small}");
}

#[test]
fn the_app_stops_its_servers_when_it_stops() {
    let markers = marker_dir();
    let tag = markers.path().to_str().unwrap().to_owned();
    let app = start(&["--marker-dir", &tag]);
    assert_eq!(
        call(&app, "echo", json!({"text": "x"}))["ToolResult"]["is_error"],
        false
    );
    assert!(!fixture_pids(&tag).is_empty(), "the server is not running");
    drop(app.stop_keep_dir());
    let until = Instant::now() + Duration::from_secs(10);
    while !fixture_pids(&tag).is_empty() {
        assert!(Instant::now() < until, "the server outlived the app");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Live (not zombie) processes whose command line mentions `tag`.
fn fixture_pids(tag: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains(tag) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().unwrap_or("").trim_start();
        if !state.starts_with('Z') && !state.is_empty() {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn krad_ext_ls_and_call() {
    let app = start(&[]);
    let ls = app.krad(&["ext", "ls"]);
    assert_eq!(exit_code(&ls), 0, "{}", stderr(&ls));
    let table = stdout(&ls);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.lines().nth(1).unwrap().contains("fx"), "{table}");
    assert!(table.contains("stopped"), "{table}");

    let echo = app.krad(&["ext", "call", "fx", "echo", "--arg", "text=hi there"]);
    assert_eq!(exit_code(&echo), 0, "{}", stderr(&echo));
    assert_eq!(stdout(&echo), "hi there\n");

    let json_args = app.krad(&[
        "ext",
        "call",
        "fx",
        "echo",
        "--args-json",
        r#"{"text":"from json"}"#,
    ]);
    assert_eq!(stdout(&json_args), "from json\n");

    let as_json = app.krad(&[
        "ext",
        "call",
        "fx",
        "echo",
        "--arg",
        r#"text="42""#,
        "--json",
    ]);
    let answer: Value = serde_json::from_str(stdout(&as_json).trim()).unwrap();
    assert_eq!(answer["ToolResult"]["content"][0]["text"], "42", "{answer}");

    let mixed = app.krad(&["ext", "call", "fx", "mixed"]);
    let out = stdout(&mixed);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "a picture:");
    let image: Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(image["type"], "image");

    let fail = app.krad(&["ext", "call", "fx", "fail", "--arg", "message=boom"]);
    assert_eq!(exit_code(&fail), 1);
    assert_eq!(stdout(&fail), "boom\n");
    assert!(
        stderr(&fail).contains("reported an error"),
        "{}",
        stderr(&fail)
    );

    let missing = app.krad(&["ext", "call", "fx", "nope"]);
    assert_eq!(exit_code(&missing), 3, "{}", stderr(&missing));
    let bad = app.krad(&["ext", "call", "fx", "echo", "--arg", "novalue"]);
    assert_eq!(exit_code(&bad), 2);

    let running = app.krad(&["ext", "ls", "--tools"]);
    let text = stdout(&running);
    assert!(
        text.contains("running") && text.contains("echo, fail"),
        "{text}"
    );
    assert!(text.contains("fx.slow  Sleeps ms milliseconds"), "{text}");
    let listed = app.krad(&["ext", "ls", "--json"]);
    let answer: Value = serde_json::from_str(stdout(&listed).trim()).unwrap();
    assert_eq!(answer["Extensions"][0]["state"], "running");
}
