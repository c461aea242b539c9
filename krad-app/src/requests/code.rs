//! Code: runs a program to completion in an environment, without a terminal
//! (see [`crate::program`] for how it runs). A plain terminal may run Code only in
//! its own environment.

use std::time::Duration;

use krad_bus::protocol::{ApiError, CodeResultInfo, ErrorCode};
use krad_bus::request::RequestKind;
use krad_bus::request::code::Code;
use krad_bus::server::{CallContext, Handle};
use krad_bus::token::Principal;
use serde_json::json;

use crate::EmbeddedApp;
use crate::profile::shell_quote;
use crate::program::{self, Program};

impl Handle<Code> for EmbeddedApp {
    async fn handle(&self, ctx: &CallContext, request: Code) -> Result<CodeResultInfo, ApiError> {
        let core = &self.core;
        if let Principal::Terminal(me) = &ctx.principal
            && request.environment != me.environment
        {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!(
                    "terminal {} may run Code only in its own environment {:?}, not {:?}",
                    me.terminal, me.environment, request.environment
                ),
            )
            .with_detail(
                json!({ "request": RequestKind::Code.name(), "environment": request.environment }),
            ));
        }
        let cwd = core.environment_path(&request.environment)?;
        let timeout = Duration::from_secs(request.timeout_secs());
        let host = core
            .store
            .environment(&request.environment)
            .and_then(|record| record.host);
        let mut env = Vec::new();
        let (argv, cwd) = match host {
            None => {
                crate::environments::ports::add_env(
                    &mut env,
                    &crate::environments::ports::block(core, &request.environment),
                );
                (request.command.clone(), cwd)
            }
            // On a host: through its control connection, with the host's own
            // `timeout` so that the program there ends with the run.
            Some(name) => {
                let host = core.hosts.get(&name)?;
                host.connect().await?;
                let mut script = format!(
                    "cd {} && {}exec timeout -s KILL {} ",
                    shell_quote(&cwd.display().to_string()),
                    crate::environments::ports::shell_exports(&crate::environments::ports::block(
                        core,
                        &request.environment
                    )),
                    timeout.as_secs() + 1
                );
                script.push_str(
                    &request
                        .command
                        .iter()
                        .map(|word| shell_quote(word))
                        .collect::<Vec<_>>()
                        .join(" "),
                );
                let mut argv = vec!["ssh".to_owned()];
                argv.extend(host.ssh_args(false));
                argv.push("--".to_owned());
                argv.push(script);
                (argv, core.settings.root.clone())
            }
        };
        let job = Program {
            argv,
            cwd,
            stdin: request.stdin.clone(),
            timeout,
            env,
        };
        match program::run(job).await {
            Ok(result) => Ok(result),
            Err(e) => Err(ApiError::new(
                ErrorCode::Failed,
                format!(
                    "cannot start {:?} in environment {:?}: {e}",
                    request
                        .command
                        .first()
                        .map(String::as_str)
                        .unwrap_or_default(),
                    request.environment
                ),
            )
            .with_detail(json!({
                "environment": request.environment,
                "command": request.command.first(),
            }))),
        }
    }
}
