//! Where templates are rendered: off the async workers, a few at a time, one per namespace, each
//! with a wall-clock limit.
//!
//! A template is tenant input. Rendering it on a tokio worker would let one tenant's template
//! hold the workers every other tenant's sync, the Lease renewal and the health probes run on,
//! and tokio cannot cancel a blocking call. So a render runs on a thread of its own, started
//! only when it holds
//!
//! - its namespace's slot (one render per namespace at a time: a namespace that renders
//!   expensive templates queues behind itself, never in front of another namespace), and
//! - one of a few global slots (the CPU renders may take at once).
//!
//! The render is given [`keyward_template::Limits`] with a deadline `limit` from its start, which
//! the evaluator checks as it goes, so the thread ends (and frees its slots) within the limit
//! plus at most one function call. The caller stops waiting at the limit plus a grace in any
//! case. Render threads are plain threads, not `spawn_blocking`: the runtime never waits for
//! them at shutdown, so SIGTERM ends the process whatever a render is doing.
//!
//! A slot that is not free soon is not waited for: the reconcile gives up with
//! [`RenderError::Busy`] and is retried with backoff, so reconciles of a namespace whose
//! renders are slow never pile up in the controller's queue.

use std::time::Duration;

use keyward_template::Limits;
use tokio::sync::oneshot;

use crate::slots::{Busy, FairSlots};

/// `Ready` reason of an ExternalSecret or PushSecret whose template ran out of its CPU budget
/// or its time.
pub const TEMPLATE_BUDGET_EXCEEDED: &str = "TemplateBudgetExceeded";

/// How long a render waits for its slots before the reconcile is retried later.
const QUEUE_WAIT: Duration = Duration::from_millis(500);
/// How long past the limit the caller still waits for a render that has not noticed its
/// deadline (one uninterruptible function call).
const GRACE: Duration = Duration::from_secs(1);

/// Why a render gave no result.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The template failed (syntax, missing key, a function error, an output limit).
    #[error("{0}")]
    Failed(String),
    /// The template ran out of its CPU budget or its time.
    #[error("template exceeded its CPU budget or its time limit of {limit:?}: {message}")]
    OverBudget {
        /// The wall-clock limit of a render.
        limit: Duration,
        /// What the engine said (which template, which line).
        message: String,
    },
    /// No slot was free soon enough: another render of the namespace (or too many renders
    /// overall) is running. Not a failure of this object; retried later.
    #[error("template rendering is waiting for a render slot ({0})")]
    Busy(&'static str),
}

impl RenderError {
    /// A template engine error: a budget error when it ran out of budget or time.
    pub fn from_template(e: &keyward_template::TemplateError, limit: Duration) -> Self {
        if e.is_over_budget() {
            RenderError::OverBudget { limit, message: e.to_string() }
        } else {
            RenderError::Failed(e.to_string())
        }
    }

    /// The same error with `context` in front of its message.
    pub fn context(self, context: &str) -> Self {
        match self {
            RenderError::Failed(m) => RenderError::Failed(format!("{context}{m}")),
            RenderError::OverBudget { limit, message } => {
                RenderError::OverBudget { limit, message: format!("{context}{message}") }
            }
            busy @ RenderError::Busy(_) => busy,
        }
    }
}

/// The bounded set of render threads.
pub struct RenderPool {
    slots: FairSlots,
    limit: Duration,
}

impl RenderPool {
    /// A pool running at most `slots` renders at once, each for at most `limit`.
    pub fn new(slots: usize, limit: Duration) -> Self {
        RenderPool { slots: FairSlots::new(slots), limit }
    }

    /// The wall-clock limit of one render.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Runs `job` on a render thread for `namespace`, with limits whose deadline is the pool's
    /// limit from the start of the render.
    pub async fn run<T, F>(&self, namespace: &str, job: F) -> Result<T, RenderError>
    where
        T: Send + 'static,
        F: FnOnce(&Limits) -> Result<T, RenderError> + Send + 'static,
    {
        let permit = self.slots.acquire(namespace, QUEUE_WAIT).await.map_err(|busy| {
            RenderError::Busy(match busy {
                Busy::Namespace => "another render of this namespace is running",
                Busy::Global => "every render slot is busy",
            })
        })?;
        let limit = self.limit;
        let (tx, rx) = oneshot::channel();
        std::thread::Builder::new()
            .name("keyward-render".into())
            .spawn(move || {
                let limits = Limits::default().within(limit);
                let out = job(&limits);
                // Slots are freed when the render really ends, not when the caller stops waiting.
                drop(permit);
                let _ = tx.send(out);
            })
            .map_err(|e| RenderError::Failed(format!("cannot start a render thread: {e}")))?;
        match tokio::time::timeout(limit + GRACE, rx).await {
            Ok(Ok(out)) => out,
            Ok(Err(_)) => Err(RenderError::Failed("template rendering stopped unexpectedly".into())),
            Err(_) => Err(RenderError::OverBudget { limit, message: "template did not finish in time".into() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[tokio::test(flavor = "current_thread")]
    async fn one_render_per_namespace_and_the_others_go_on() {
        let pool = Arc::new(RenderPool::new(2, Duration::from_secs(2)));
        // A render that holds its namespace's slot for a while.
        let slow = {
            let pool = pool.clone();
            tokio::spawn(async move {
                pool.run("tenant", |_| {
                    std::thread::sleep(Duration::from_millis(1500));
                    Ok(())
                })
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        let busy = pool.run("tenant", |_| Ok(())).await;
        assert!(matches!(busy, Err(RenderError::Busy(_))), "{busy:?}");
        assert!(started.elapsed() < Duration::from_secs(1), "gave up after {:?}", started.elapsed());
        let other = pool.run("other", |_| Ok(7)).await;
        assert_eq!(other.unwrap(), 7, "another namespace renders meanwhile");
        slow.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_render_that_overruns_is_reported_and_its_deadline_is_set() {
        let pool = RenderPool::new(1, Duration::from_millis(200));
        let r = pool
            .run("ns", |limits| {
                assert!(limits.deadline.is_some(), "renders get a deadline");
                std::thread::sleep(Duration::from_secs(3));
                Ok(())
            })
            .await;
        assert!(matches!(r, Err(RenderError::OverBudget { .. })), "{r:?}");
        let budget = keyward_template::render(
            &[("t", "{{ range until 100000 }}{{ if bcrypt \"x\" }}{{ end }}{{ end }}")],
            &Default::default(),
            &Limits { max_steps: 1_500_000, ..Limits::default() },
        )
        .unwrap_err();
        let e = RenderError::from_template(&budget, Duration::from_secs(5)).context("template failed: ");
        assert!(e.to_string().contains("CPU budget"), "{e}");
        assert!(matches!(e, RenderError::OverBudget { .. }));
    }
}
