//! `krad ui`: a one-time login URL for the app's page, opened in a browser
//! when there is one. The URL comes from the page's server itself, asked over
//! loopback with the client token from api.json (in a header, never in argv).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::connect::{ConnectArgs, running_app};
use crate::exit::{Exit, Failure};
use crate::print;

/// Arguments of `krad ui`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The URL works once, within two minutes; it logs the browser in with a \
    session cookie. A browser is opened with $BROWSER, or xdg-open when a display is there. \
    The page is on by default; `[ui] enabled = false` in the config turns it off (docs/ui.md).\n\n\
    Examples:\n  krad ui\n  krad ui --no-open\n  krad ui --json | jq -r .Ui.url"
)]
pub(crate) struct UiArgs {
    /// Print the URL only; do not start a browser.
    #[arg(long)]
    pub no_open: bool,
}

/// Asks the page for a login URL, prints it and opens it.
pub(crate) fn run(args: UiArgs, connect: &ConnectArgs, json: bool) -> anyhow::Result<Exit> {
    let app = running_app(connect.repo.as_deref())?;
    let Some(page) = app.ui.as_deref() else {
        return Err(Failure::new(
            Exit::Failure,
            "the app serves no page: `[ui] enabled = false` in its config (docs/ui.md)",
        )
        .into());
    };
    let answer = login_link(page, app.token.expose())?;
    let url = answer
        .url
        .clone()
        .ok_or_else(|| Failure::new(Exit::Failure, "the page answered no login URL"))?;
    let opened = if args.no_open {
        None
    } else {
        open_browser(&url)
    };
    if json {
        print::message(&Shown::Ui {
            url: &url,
            page,
            expires_in_secs: answer.expires_in_secs.as_ref(),
            opened_with: opened.as_deref(),
        });
    } else {
        let mut text =
            format!("krad: log in to the app's page (once, within two minutes):\n  {url}");
        if let Some(browser) = opened {
            text.push_str(&format!("\n  opened with {browser}"));
        }
        print::line(&text);
    }
    Ok(Exit::Success)
}

/// The page's answer to `POST /api/login-link`.
#[derive(Deserialize)]
struct LoginLink {
    /// The one-time URL.
    url: Option<String>,
    /// How long it is good for, as the page said it.
    expires_in_secs: Option<Value>,
}

/// What `krad ui --json` prints.
#[derive(Serialize)]
enum Shown<'a> {
    Ui {
        url: &'a str,
        page: &'a str,
        expires_in_secs: Option<&'a Value>,
        opened_with: Option<&'a str>,
    },
}

/// `POST /api/login-link` with the client token as a bearer token.
fn login_link(page: &str, token: &str) -> Result<LoginLink, Failure> {
    let unreachable = |why: String| {
        Failure::new(
            Exit::Unreachable,
            format!("cannot reach the app's page at {page}: {why}"),
        )
    };
    let host = page
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix('/'))
        .ok_or_else(|| unreachable("api.json names no http://host:port/ page".into()))?;
    let address = host
        .parse::<std::net::SocketAddr>()
        .map_err(|e| unreachable(e.to_string()))?;
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(3))
        .map_err(|e| unreachable(e.to_string()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| unreachable(e.to_string()))?;
    let request = format!(
        "POST /api/login-link HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| unreachable(e.to_string()))?;
    let mut response = Vec::new();
    stream
        .take(1 << 20)
        .read_to_end(&mut response)
        .map_err(|e| unreachable(e.to_string()))?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split_whitespace().nth(1).unwrap_or("");
    match status {
        "200" => serde_json::from_str(body)
            .map_err(|e| Failure::new(Exit::Failure, format!("the page's answer: {e}"))),
        "401" => Err(Failure::new(
            Exit::Denied,
            "the page refused the client token of api.json: is api.json this app's?",
        )),
        other => Err(Failure::new(
            Exit::Failure,
            format!("the page answered {other}: {}", body.trim()),
        )),
    }
}

/// Starts `$BROWSER`, or xdg-open when a display is there; the program's name.
fn open_browser(url: &str) -> Option<String> {
    let browser = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .or_else(|| {
            let display = std::env::var_os("DISPLAY").is_some()
                || std::env::var_os("WAYLAND_DISPLAY").is_some();
            (display && which("xdg-open")).then(|| "xdg-open".to_owned())
        })?;
    // $BROWSER may list several, separated by ':' (the old convention).
    let first = browser.split(':').next()?.trim().to_owned();
    Command::new(&first)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
        .map(|_| first)
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}
