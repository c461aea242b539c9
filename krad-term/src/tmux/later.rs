//! [`Later`]: work a tmux client does off its reader thread — a pane's exit
//! status asked again shortly, a terminal's end once its output is parsed —
//! run by one thread per client, each job at its time, in order of time (and of
//! queueing, for equal times). One thread for all of it, not one per job.

use std::io;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

type Work = Box<dyn FnOnce() + Send>;

/// The client's queue of jobs for later.
#[derive(Debug)]
pub(super) struct Later {
    jobs: mpsc::Sender<(Instant, Work)>,
}

impl Later {
    /// Starts the thread that runs the jobs; it ends once this is dropped and
    /// every job queued has run.
    pub(super) fn start() -> io::Result<Later> {
        let (jobs, queued) = mpsc::channel();
        std::thread::Builder::new()
            .name("krad-tmux-later".into())
            .spawn(move || run(&queued))?;
        Ok(Later { jobs })
    }

    /// Runs `work` after `delay`; false if the thread is gone (it never is
    /// while this lives, unless a job panicked).
    pub(super) fn after(&self, delay: Duration, work: impl FnOnce() + Send + 'static) -> bool {
        self.jobs
            .send((Instant::now() + delay, Box::new(work)))
            .is_ok()
    }
}

fn run(queued: &mpsc::Receiver<(Instant, Work)>) {
    // Sorted by time; a new job goes after those due at the same time.
    let mut pending: Vec<(Instant, Work)> = Vec::new();
    let mut open = true;
    loop {
        let now = Instant::now();
        while pending.first().is_some_and(|(due, _)| *due <= now) {
            let (_, work) = pending.remove(0);
            work();
        }
        let next = match (pending.first(), open) {
            (None, false) => return,
            (Some((due, _)), true) => queued.recv_timeout(due.saturating_duration_since(now)),
            (None, true) => queued.recv().map_err(|_| RecvTimeoutError::Disconnected),
            (Some((due, _)), false) => {
                std::thread::sleep(due.saturating_duration_since(now));
                continue;
            }
        };
        match next {
            Ok((due, work)) => {
                let at = pending.partition_point(|(other, _)| *other <= due);
                pending.insert(at, (due, work));
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => open = false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn jobs_run_in_order_of_time_then_of_queueing_and_all_run_after_the_end() {
        let done = Arc::new(Mutex::new(Vec::new()));
        let later = Later::start().unwrap();
        let (finished, all_done) = mpsc::channel();
        for (name, delay) in [("c", 60), ("a", 0), ("b", 30), ("b2", 30)] {
            let done = done.clone();
            let finished = finished.clone();
            assert!(later.after(Duration::from_millis(delay), move || {
                done.lock().unwrap().push(name);
                finished.send(()).unwrap();
            }));
        }
        drop(later);
        for _ in 0..4 {
            all_done.recv_timeout(Duration::from_secs(30)).unwrap();
        }
        assert_eq!(*done.lock().unwrap(), ["a", "b", "b2", "c"]);
    }
}
