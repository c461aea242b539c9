//! What a sandbox costs a Spawn (issue 39): from the Spawn to the program
//! running (it creates a file in its directory), for a program in bubblewrap
//! against the same program without, alternated in one app.

use std::time::{Duration, Instant};

use anyhow::Context;
use krad_bus::request::close::Close;
use krad_bus::request::spawn::Spawn;

use crate::Ctx;
use crate::krad::Krad;
use crate::util::Summary;

/// Prints Spawn-to-running with and without a sandbox, and their ratio.
pub(crate) fn sandbox(ctx: &Ctx) -> anyhow::Result<()> {
    let krad = Krad::start(&ctx.krad, &[])?;
    let repo = krad.dir.path().join("repo");
    let rounds = ctx.repeats * 10;
    let (mut plain, mut contained) = (Vec::new(), Vec::new());
    let mut ids = Vec::new();
    for round in 0..rounds + 2 {
        for sandboxed in [round % 2 == 0, round % 2 == 1] {
            let mark = format!("running-{round}-{sandboxed}");
            let started = Instant::now();
            let spawn = Spawn {
                profile: Some("exec".to_owned()),
                sandbox: Some(sandboxed),
                command: Some(vec![
                    "sh".to_owned(),
                    "-c".to_owned(),
                    format!(": > {mark}; exec sleep 3600"),
                ]),
                ..Spawn::default()
            };
            let id = krad.call(spawn).context("Spawn failed")?.terminal;
            let until = started + Duration::from_secs(10);
            while !repo.join(&mark).exists() {
                anyhow::ensure!(Instant::now() < until, "terminal {id} never ran");
                std::thread::sleep(Duration::from_micros(200));
            }
            let ms = started.elapsed().as_secs_f64() * 1e3;
            ids.push(id);
            if round >= 2 {
                if sandboxed {
                    contained.push(ms);
                } else {
                    plain.push(ms);
                }
            }
        }
    }
    for id in ids {
        krad.answered(Close {
            target: Some(id),
            ..Close::default()
        })?;
    }
    let (plain, contained) = (Summary::of(&plain), Summary::of(&contained));
    ctx.out(&format!(
        "### Spawn to running, in a sandbox and not ({rounds} each, alternated)\n\n\
         | | ms, median (min–max) |\n|---|---|\n\
         | without | {} |\n| in bubblewrap | {} |\n\n\
         sandbox ÷ without: {:.2}\n",
        plain.show(2),
        contained.show(2),
        contained.median / plain.median
    ));
    Ok(())
}
