//! Counters behind the `Stats` request, kept with atomics so that counting never
//! waits on anything.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::protocol::ErrorCode;

/// What the bus counts while it serves.
#[derive(Debug, Default)]
pub struct Counters {
    requests_total: AtomicU64,
    errors: [AtomicU64; ErrorCode::ALL.len()],
    waits_pending: AtomicU64,
    subscribers: AtomicU64,
}

impl Counters {
    /// Counts one answered request, and its error code if it failed.
    pub fn answered(&self, error: Option<ErrorCode>) {
        self.requests_total.fetch_add(1, Ordering::Relaxed);
        if let Some(counter) = error.and_then(|code| self.errors.get(code.index())) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Requests answered so far.
    pub fn requests_total(&self) -> u64 {
        self.requests_total.load(Ordering::Relaxed)
    }

    /// Error answers by code; codes never seen are left out.
    pub fn errors_by_code(&self) -> std::collections::BTreeMap<String, u64> {
        ErrorCode::ALL
            .iter()
            .filter_map(|code| {
                let n = self.errors.get(code.index())?.load(Ordering::Relaxed);
                (n > 0).then(|| (code.as_str().to_owned(), n))
            })
            .collect()
    }

    /// Requests waiting right now.
    pub fn waits_pending(&self) -> u64 {
        self.waits_pending.load(Ordering::Relaxed)
    }

    /// Streams open right now.
    pub fn subscribers(&self) -> u64 {
        self.subscribers.load(Ordering::Relaxed)
    }

    /// Marks a waiting request for as long as the guard lives.
    pub fn wait_guard(&self) -> GaugeGuard<'_> {
        GaugeGuard::new(&self.waits_pending)
    }

    /// Marks an open stream for as long as the guard lives.
    pub fn subscriber_guard(&self) -> GaugeGuard<'_> {
        GaugeGuard::new(&self.subscribers)
    }
}

/// Adds one to a gauge while it lives.
#[derive(Debug)]
pub struct GaugeGuard<'a>(&'a AtomicU64);

impl<'a> GaugeGuard<'a> {
    fn new(gauge: &'a AtomicU64) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        GaugeGuard(gauge)
    }
}

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
