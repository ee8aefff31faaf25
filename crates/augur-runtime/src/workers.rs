//! The worker pool of a node in the real runtimes: threads that run the work its handlers hand
//! off ([`augur_contract::Ctx::offload`]), so a protocol's CPU-heavy, side-effect-free work (a procedure
//! run) goes on in parallel with the node's handler loop and with other such work. The
//! simulator does not use it: there the CPU model's cores play its part.
//!
//! The threads start with the first job (most protocols never hand any off) and end when the
//! pool is dropped, once the jobs already queued are done. A job that panics loses only its own
//! result, which never arrives, as if the node had crashed while running it; the thread goes on.

use std::num::NonZeroUsize;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use tracing::error;

type Job = Box<dyn FnOnce() + Send>;

/// A fixed number of worker threads taking jobs from one queue, in the order they were queued.
pub struct WorkerPool {
    size: NonZeroUsize,
    name: String,
    /// The queue, once the threads are started.
    queue: Option<mpsc::Sender<Job>>,
}

impl WorkerPool {
    /// A pool of `size` threads named `name`, started lazily.
    pub fn new(name: impl Into<String>, size: NonZeroUsize) -> WorkerPool {
        WorkerPool {
            size,
            name: name.into(),
            queue: None,
        }
    }

    /// A pool with one thread per core this process may use.
    pub fn per_core(name: impl Into<String>) -> WorkerPool {
        let size = thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
        WorkerPool::new(name, size)
    }

    /// How many threads run jobs.
    pub fn size(&self) -> usize {
        self.size.get()
    }

    /// Queue `job` for the next free thread.
    pub fn submit(&mut self, job: Job) {
        let queue = self.queue.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let rx = Arc::new(Mutex::new(rx));
            for i in 0..self.size.get() {
                let rx = Arc::clone(&rx);
                let spawned = thread::Builder::new()
                    .name(format!("{}-{i}", self.name))
                    .spawn(move || work(&rx));
                if let Err(e) = spawned {
                    // Fewer threads run the jobs; with none at all they would never run.
                    error!("cannot start worker thread {i} of {}: {e}", self.size);
                    assert!(i > 0, "no worker thread could be started: {e}");
                }
            }
            tx
        });
        // The threads hold the receiver until the sender is dropped, so this cannot fail.
        let _ = queue.send(job);
    }
}

/// One worker thread: take jobs until the pool is dropped.
fn work(queue: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        // The lock is held only while taking a job, never while running one.
        let next = queue.lock().map(|rx| rx.recv());
        let Ok(Ok(job)) = next else {
            return;
        };
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
            error!("a job handed off to a worker panicked; its result is lost");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_job_runs_once_on_the_pools_threads_and_a_panic_loses_only_its_own() {
        let mut pool = WorkerPool::new("test-worker", NonZeroUsize::new(3).unwrap());
        assert_eq!(pool.size(), 3);
        let (tx, rx) = mpsc::channel();
        pool.submit(Box::new(|| panic!("a job that fails")));
        for i in 0..100u32 {
            let tx = tx.clone();
            pool.submit(Box::new(move || {
                let name = thread::current().name().map(str::to_string);
                tx.send((i, name)).unwrap();
            }));
        }
        drop(tx);
        let mut seen: Vec<(u32, Option<String>)> = rx.iter().collect();
        seen.sort();
        assert_eq!(seen.len(), 100);
        for (i, (job, name)) in seen.iter().enumerate() {
            assert_eq!(*job, i as u32);
            assert!(
                name.as_deref().unwrap().starts_with("test-worker-"),
                "{name:?}"
            );
        }
    }
}
