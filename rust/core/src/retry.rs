//! When to try again, and how long to wait. A failure is worth another attempt when it is what a cluster answers
//! while a server restarts or a stream elects its leader ([`is_transient`]); the
//! attempts wait twice as long each time, up to a bound ([`Backoff`]); and a caller's
//! budget ends them ([`retry_transient`]), the last error then returned with its kind.
//!
//! Every loop that tries again takes its rule, its pauses and its budget from here
//! ([`Retry`]): the API's patient requests (also exported to Python, so Spark's
//! driver asks as patiently as its executors read), `first_seq_at`, an ordered read's
//! resume, the direct gets' resends (`read/direct.rs` for ranges and `read/last.rs`
//! for the latest per subject, through their shared `DirectRequests`), a fetch asked
//! again while its consumer is not loaded yet (`consume/pull.rs`), and the publishes'
//! resends (`publish/acks.rs` schedules them by [`Backoff::delay`] beside the acks it
//! waits for; `publish/atomic.rs` waits [`Backoff::wait`]). The loops keep their own
//! state (what was delivered, which rows are pending); none of them sleeps itself.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, ErrorKind, Result};

/// Pauses that double from `first` up to `max`: attempt 0 waits `first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Backoff {
    /// Asking the JetStream API again (a stream's state, a message by time).
    pub const API: Backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(1));
    /// Recreating a read's consumer after it failed.
    pub const RESUME: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    /// Fetching again while a restarted server loads the consumer (`503`): it is
    /// loaded within the fetch's own deadline or said to be missing.
    pub const CONSUMER_LOADING: Backoff =
        Backoff::new(Duration::from_millis(100), Duration::from_millis(100));

    pub const fn new(first: Duration, max: Duration) -> Self {
        Self { first, max }
    }

    /// Resending rows: from the publish's `retry_backoff` up to two seconds.
    pub fn publish(retry_backoff: Duration) -> Self {
        Self::new(retry_backoff, Duration::from_secs(2))
    }

    /// The pause before attempt `attempt + 1`.
    pub fn delay(&self, attempt: u32) -> Duration {
        self.first
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.max)
    }

    /// Wait the pause before attempt `attempt + 1`, for a loop bounded by a count of
    /// attempts rather than by time (a publish's `max_retries`).
    pub async fn wait(&self, attempt: u32) {
        tokio::time::sleep(self.delay(attempt)).await;
    }
}

/// The attempts of one retry loop bounded by time: the pauses between them, and the
/// budget they are made within. The budget is counted from the first failure since
/// the last success ([`Retry::after_first_failure`]) or from the loop's start
/// ([`Retry::from_now`]); a success starts it again.
#[derive(Debug)]
pub struct Retry {
    backoff: Backoff,
    within: Duration,
    failing_since: Option<Instant>,
    attempt: u32,
}

impl Retry {
    /// Failures may go on for `within` after the first of them.
    pub fn after_first_failure(backoff: Backoff, within: Duration) -> Self {
        Self {
            backoff,
            within,
            failing_since: None,
            attempt: 0,
        }
    }

    /// Failures may go on until `within` from now.
    pub fn from_now(backoff: Backoff, within: Duration) -> Self {
        Self {
            failing_since: Some(Instant::now()),
            ..Self::after_first_failure(backoff, within)
        }
    }

    /// The budget given (what a caller's error names).
    pub fn within(&self) -> Duration {
        self.within
    }

    /// An attempt succeeded: the next failure starts a new budget and pauses anew.
    pub fn succeeded(&mut self) {
        self.failing_since = None;
        self.attempt = 0;
    }

    /// What is left of the budget (all of it while nothing fails), for an attempt
    /// that must end within it.
    pub fn left(&self) -> Duration {
        match self.failing_since {
            None => self.within,
            Some(since) => (since + self.within).saturating_duration_since(Instant::now()),
        }
    }

    /// When the budget ends (it starts now if nothing failed yet).
    pub fn give_up_at(&mut self) -> Instant {
        *self.failing_since.get_or_insert_with(Instant::now) + self.within
    }

    /// An attempt failed: whether the budget still allows another one at once.
    pub fn may_try_again(&mut self) -> bool {
        Instant::now() < self.give_up_at()
    }

    /// An attempt failed: wait the next pause and answer true, or answer false at once
    /// when the pause would not end within the budget.
    pub async fn pause(&mut self) -> bool {
        let pause = self.backoff.delay(self.attempt);
        if Instant::now() + pause >= self.give_up_at() {
            return false;
        }
        tokio::time::sleep(pause).await;
        self.attempt = self.attempt.saturating_add(1);
        true
    }
}

/// Whether `err` is what a cluster answers while a server restarts or a stream's
/// leader is being elected: worth asking again shortly.
pub fn is_transient(err: &Error) -> bool {
    match err.kind() {
        // Not `JetStreamNotEnabled`: a server without JetStream would be waited for
        // in vain, and must be said at once.
        ErrorKind::Timeout | ErrorKind::Connection => true,
        ErrorKind::Api => err.api_code().is_some_and(|c| c.code == 503),
        _ => false,
    }
}

/// `op()`, tried again after each transient failure for up to `within`, pausing as
/// `backoff` says; then its last answer, error or not.
pub async fn retry_transient<T, F, Fut>(within: Duration, backoff: Backoff, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut retry = Retry::from_now(backoff, within);
    loop {
        match op().await {
            Err(e) if is_transient(&e) && retry.pause().await => {}
            answered => return answered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_bound() {
        let b = Backoff::new(Duration::from_millis(50), Duration::from_secs(1));
        let pauses: Vec<u128> = (0..7).map(|a| b.delay(a).as_millis()).collect();
        assert_eq!(pauses, [50, 100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1));
        assert_eq!(Backoff::publish(Duration::ZERO).delay(5), Duration::ZERO);
    }

    #[tokio::test]
    async fn transient_failures_are_retried_within_the_budget_and_others_at_once() {
        let quick = Backoff::new(Duration::from_millis(1), Duration::from_millis(4));
        let mut calls = 0;
        let found: Result<u32> = retry_transient(Duration::from_secs(5), quick, || {
            calls += 1;
            let n = calls;
            async move {
                if n < 4 {
                    Err(Error::timeout("no reply"))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(found.unwrap(), 4);

        let mut calls = 0;
        let refused: Result<()> = retry_transient(Duration::from_secs(5), quick, || {
            calls += 1;
            async { Err(Error::bad_input("no such stream")) }
        })
        .await;
        assert_eq!(
            (refused.unwrap_err().kind(), calls),
            (ErrorKind::BadInput, 1)
        );

        let (started, mut calls) = (std::time::Instant::now(), 0);
        let gave_up: Result<()> = retry_transient(Duration::from_millis(60), quick, || {
            calls += 1;
            async { Err(Error::timeout("no reply")) }
        })
        .await;
        assert_eq!(gave_up.unwrap_err().kind(), ErrorKind::Timeout);
        // Never a pause past the budget: the last attempt starts before it ends.
        assert!(started.elapsed() < Duration::from_millis(60) + Duration::from_millis(50));
        assert!(
            calls > 10,
            "{calls} attempts in 60 ms of pauses of at most 4 ms"
        );
    }

    #[tokio::test]
    async fn a_budget_starts_at_the_first_failure_and_again_after_a_success() {
        let quick = Backoff::new(Duration::from_millis(5), Duration::from_millis(5));
        let mut retry = Retry::after_first_failure(quick, Duration::from_millis(40));
        // Nothing failed yet: the budget has not started, however long that lasts.
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(retry.left(), Duration::from_millis(40));
        assert!(retry.may_try_again());
        let mut pauses = 0;
        while retry.pause().await {
            pauses += 1;
            assert!(pauses < 100, "the budget of 40 ms never ended");
        }
        // At most 8 pauses of 5 ms fit; a loaded machine's sleeps run longer.
        assert!(
            (1..=8).contains(&pauses),
            "{pauses} pauses of 5 ms in 40 ms"
        );
        // A success: failures begin a new budget.
        retry.succeeded();
        assert!(retry.may_try_again());
        assert!(retry.pause().await);

        // From now: the budget runs whether or not anything failed.
        let mut retry = Retry::from_now(quick, Duration::from_millis(20));
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!retry.pause().await);
        assert_eq!(retry.left(), Duration::ZERO);
    }
}
