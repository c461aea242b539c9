//! The bus library served in-process with an app of the test's own, over real
//! sockets: what needs a secret the test holds (terminal and lead tokens) or an
//! app that is kept busy.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use krad_bus::protocol::{
    ApiError, AttachInput, AttachMessage, EncodedAnswer, StreamLine, TerminalRef,
};
use krad_bus::request::Call;
use krad_bus::server::{
    self, App, Attachment, Bus, CallContext, Handle, HandleEncoded, Open, ServerConfig,
    Subscription,
};
use krad_bus::token::Secret;
use serde_json::{Value, json};

/// An app whose every piece of work never finishes, and which counts the work
/// it was given: proof that the bus answers Hello without it.
struct StuckApp {
    started: AtomicUsize,
}

impl StuckApp {
    async fn stuck<T>(&self) -> T {
        self.started.fetch_add(1, Ordering::SeqCst);
        std::future::pending().await
    }
}

/// The stream of a stuck app never yields.
struct NoStream;

impl Subscription for NoStream {
    async fn next(&mut self) -> Option<StreamLine> {
        std::future::pending().await
    }
}

impl Attachment for NoStream {
    async fn next(&mut self) -> Option<AttachMessage> {
        std::future::pending().await
    }
    async fn input(&mut self, _: AttachInput) -> Result<(), ApiError> {
        std::future::pending().await
    }
}

impl App for StuckApp {
    fn request_log(&self) -> Option<&krad_bus::server::request_log::RequestLog> {
        None
    }
    fn knows_terminal(&self, _terminal: &TerminalRef) -> bool {
        true
    }
    async fn agent_count(&self) -> u64 {
        self.stuck().await
    }
}

/// Both streaming requests: a stream that never yields, once the app answers.
impl<R: Call> Open<R> for StuckApp {
    type Stream = NoStream;

    async fn open(&self, _: &CallContext, _: R) -> Result<NoStream, ApiError> {
        self.stuck().await
    }
}

/// Every request the app answers, in one impl: the typed handler trait is
/// generic, so a test app need not name them.
impl<R: Call> Handle<R> for StuckApp {
    async fn handle(&self, _: &CallContext, _: R) -> Result<R::Answer, ApiError> {
        self.stuck().await
    }
}

impl<R: Call> HandleEncoded<R> for StuckApp {
    async fn handle_encoded(&self, _: &CallContext, _: R) -> Result<EncodedAnswer, ApiError> {
        self.stuck().await
    }
}

struct Served {
    bus: Arc<Bus>,
    app: Arc<StuckApp>,
    endpoint: SocketAddr,
    runtime: tokio::runtime::Runtime,
}

fn serve() -> Served {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bus = Arc::new(Bus::new(
        Arc::new(Secret::generate().unwrap()),
        ServerConfig::default(),
    ));
    let app = Arc::new(StuckApp {
        started: AtomicUsize::new(0),
    });
    let listener = runtime.block_on(server::bind(0)).unwrap();
    let endpoint = listener.local_addr().unwrap();
    runtime.spawn(server::serve(listener, bus.clone(), app.clone()));
    Served {
        bus,
        app,
        endpoint,
        runtime,
    }
}

fn call(endpoint: SocketAddr, envelope: &Value) -> Value {
    let mut stream = TcpStream::connect(endpoint).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut line = serde_json::to_vec(envelope).unwrap();
    line.push(b'\n');
    stream.write_all(&line).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    serde_json::from_str(answer.trim_end()).unwrap_or_else(|e| panic!("{answer:?}: {e}"))
}

fn terminal(id: u64) -> TerminalRef {
    TerminalRef {
        environment: "main".into(),
        terminal: id,
    }
}

fn from(t: &TerminalRef) -> Value {
    json!({"Terminal": {"environment": t.environment, "terminal": t.terminal}})
}

#[test]
fn hello_is_answered_while_the_app_is_stuck() {
    let served = serve();
    let token = served.bus.secret().client_token().expose().to_owned();
    // Fifty requests that need the app, all stuck in it.
    let stuck: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut s = TcpStream::connect(served.endpoint).unwrap();
            let line =
                json!({"token": token, "from": "Client", "request": "Stats"}).to_string() + "\n";
            s.write_all(line.as_bytes()).unwrap();
            s
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(5);
    while served.app.started.load(Ordering::SeqCst) < 50 {
        assert!(Instant::now() < until, "the app never got the work");
        std::thread::sleep(Duration::from_millis(5));
    }
    let started = Instant::now();
    let hello = call(
        served.endpoint,
        &json!({"token": token, "from": "Client", "request": "Hello"}),
    );
    assert!(hello["Hello"].is_object(), "{hello}");
    assert!(started.elapsed() < Duration::from_secs(2));
    drop(stuck);
    served.bus.request_shutdown(true);
    drop(served.runtime);
}

#[test]
fn a_client_leaving_cancels_its_wait() {
    let served = serve();
    let token = served.bus.secret().client_token().expose().to_owned();
    let mut waiter = TcpStream::connect(served.endpoint).unwrap();
    let line = json!({"token": token, "from": "Client", "request": {"Wait": {"target": 1, "timeout_secs": 600}}}).to_string() + "\n";
    waiter.write_all(line.as_bytes()).unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while served.bus.counters().waits_pending() != 1 {
        assert!(Instant::now() < until, "the wait never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(waiter);
    let until = Instant::now() + Duration::from_secs(5);
    while served.bus.counters().waits_pending() != 0 {
        assert!(Instant::now() < until, "the wait outlived its client");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn stuck_work_times_out_at_its_deadline() {
    let served = serve();
    let token = served.bus.secret().client_token().expose().to_owned();
    let started = Instant::now();
    let answer = call(
        served.endpoint,
        &json!({"token": token, "from": "Client", "request": "Stats"}),
    );
    assert_eq!(answer, json!("TimedOut"));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(9_900) && took < Duration::from_secs(15),
        "{took:?}"
    );
}

#[test]
fn a_terminal_token_is_valid_for_that_terminal_only() {
    let served = serve();
    let secret = served.bus.secret();
    let four = terminal(4);
    let token = secret.bus_token(&four).expose().to_owned();
    let ok = call(
        served.endpoint,
        &json!({"token": token, "from": from(&four), "request": "Hello"}),
    );
    assert!(ok["Hello"].is_object());
    for caller in [
        from(&terminal(5)),
        json!("Client"),
        json!({"Terminal":{"environment":"other","terminal":4}}),
    ] {
        let answer = call(
            served.endpoint,
            &json!({"token": token, "from": caller, "request": "Hello"}),
        );
        assert_eq!(answer["Error"]["code"], "unauthorized", "{caller}");
    }
}

#[test]
fn only_client_may_shut_down() {
    let served = serve();
    let secret = served.bus.secret();
    let four = terminal(4);
    for token in [secret.bus_token(&four), secret.lead_token(&four)] {
        let answer = call(
            served.endpoint,
            &json!({"token": token.expose(), "from": from(&four), "request": "Shutdown"}),
        );
        assert_eq!(answer["Error"]["code"], "forbidden", "{answer}");
        assert_eq!(answer["Error"]["detail"]["request"], "Shutdown");
    }
    // Forbidden is decided after the version: a terminal speaking v2 hears about the version.
    let answer = call(
        served.endpoint,
        &json!({"api_version": 2, "token": secret.bus_token(&four).expose(), "from": from(&four), "request": "Shutdown"}),
    );
    assert_eq!(answer["Error"]["code"], "unsupported_api_version");
    // Terminals may make the requests everyone may make.
    let answer = call(
        served.endpoint,
        &json!({"token": secret.lead_token(&four).expose(), "from": from(&four), "request": "Hello"}),
    );
    assert!(answer["Hello"].is_object());
    // And Client may shut down.
    let answer = call(
        served.endpoint,
        &json!({"token": secret.client_token().expose(), "from": "Client", "request": "Shutdown"}),
    );
    assert_eq!(answer, json!("Ok"));
}
