//! The smallest useful bus client, the yardstick for `krad api`: connects to the
//! endpoint, writes the request line read from a file, copies the answer to stdout
//! until the app closes. No runtime, no parsing.
//!
//! `krad-mini-client 127.0.0.1:PORT LINE_FILE`

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(endpoint), Some(file)) = (args.next(), args.next()) else {
        eprintln!("usage: krad-mini-client 127.0.0.1:PORT LINE_FILE");
        return ExitCode::from(2);
    };
    match run(&endpoint, &file) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("krad-mini-client: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(endpoint: &str, file: &str) -> std::io::Result<()> {
    let line = std::fs::read(file)?;
    let mut stream = TcpStream::connect(endpoint)?;
    stream.write_all(&line)?;
    let mut answer = Vec::with_capacity(1024);
    stream.read_to_end(&mut answer)?;
    std::io::stdout().write_all(&answer)
}
