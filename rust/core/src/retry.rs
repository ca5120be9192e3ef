//! When to try again, and how long to wait. A failure is worth another attempt when it is what a cluster answers
//! while a server restarts or a stream elects its leader ([`is_transient`]); the
//! attempts wait twice as long each time, up to a bound ([`Backoff`]); and a caller's
//! budget ends them ([`retry_transient`]), the last error then returned with its kind.
//!
//! The API's patient requests, `first_seq_at`, an ordered read's resume and the
//! publishes' resends take their rule and pauses from here, and keep their own state
//! (what was delivered, which rows are pending). Not yet: the direct-get loops
//! (`read/direct.rs`, `read/last.rs`) and the pull loop (`consume/pull.rs`) pause a
//! fixed 100 ms within their own budgets.

use std::future::Future;
use std::time::Duration;

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
    let give_up = tokio::time::Instant::now() + within;
    let mut attempt = 0;
    loop {
        let pause = backoff.delay(attempt);
        match op().await {
            Err(e) if is_transient(&e) && tokio::time::Instant::now() + pause < give_up => {
                tokio::time::sleep(pause).await;
                attempt += 1;
            }
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
}
