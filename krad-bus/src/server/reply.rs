//! What became of a request: the answer the connection writes (typed, spliced
//! or replayed), the stream or attachment it serves, or nothing when the client
//! left. Made by the dispatch and by the requests the bus answers itself.

use crate::protocol::{ApiError, EncodedAnswer, Response, TypedAnswer};

/// What became of a request.
///
/// Its larger payloads are boxed, so a `Reply` is a few words: every future
/// that will hold one (a connection's task while its request is held, a
/// request's boxed work) reserves room for it from the start, for as long as
/// the request runs — a Wait, up to 30 minutes.
pub(crate) enum Reply<S, T> {
    /// Write this answer.
    Answer(Box<Response>),
    /// Write this answer line, spliced by the app from cached JSON.
    Encoded(EncodedAnswer),
    /// Write this answer, as recorded earlier (a replay).
    Recorded(serde_json::Value),
    /// Serve this stream.
    Stream(Box<S>),
    /// Serve this attachment (lines both ways).
    Attach(Box<T>),
    /// The client left while its request waited; nothing is written.
    Left,
}

impl<S, T> Reply<S, T> {
    /// Write this answer (an error, `"TimedOut"` …).
    pub(crate) fn answer(response: impl Into<Response>) -> Self {
        Reply::Answer(Box::new(response.into()))
    }

    /// A handler's typed result, as the response on the wire.
    pub(crate) fn answered<R: TypedAnswer>(result: Result<R, ApiError>) -> Self {
        match result {
            Ok(answer) => Reply::answer(answer.into_response()),
            Err(e) => Reply::answer(e),
        }
    }
}
