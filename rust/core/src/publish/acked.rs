//! The acked publish: every message acknowledged on its own, pipelined through a
//! bounded window of messages awaiting acks, resent on `429`/`503` and, when it has a
//! msg id, on an ack that does not come. One function, because the order of filling,
//! waiting and expiring is the publisher's guarantee, read in one place.

use arrow_array::RecordBatch;
use futures::{FutureExt, StreamExt};
use tokio::time::Instant;

use super::acks::{PublishRun, RetryQueue};
use super::rows::{refuse_all, refuse_rest, RowSource};
use super::window::{Congestion, Window};
use super::{send, OnFull, PublishOutcome, Publisher};
use crate::error::{Error, Result};

impl Publisher {
    /// [`Publisher::publish`] in acked mode: every message acknowledged on its own,
    /// pipelined through the window, resent on pushback or an unanswered ack (with a
    /// msg id), until every row is stored, a duplicate or failed.
    pub(super) async fn run_acked<I>(
        &mut self,
        source: &mut RowSource<I>,
        outcome: &mut PublishOutcome,
    ) -> Result<()>
    where
        I: Iterator<Item = Result<RecordBatch>>,
    {
        let mut run = PublishRun {
            options: &self.options,
            conn: &self.conn,
            probe_last_id: &self.probe_last_id,
            in_flight: Window::new(self.options.max_bytes_in_flight),
            congestion: Congestion::new(self.options.window),
            retries: RetryQueue::default(),
            // With expected-last-* checks, the first row goes alone; the rest follows
            // only if it was stored, so a failed expectation stores nothing.
            gate: self.options.has_expectations().then_some(0),
            outcome,
        };
        let mut stop: Option<Error> = None;
        // Since when the connection has been seen down (None: up at the last look).
        let mut down_since: Option<Instant> = None;
        let id_base = self.rows_before + self.options.msg_id_start;

        let lost: Option<Error> = 'run: loop {
            // 1. Fill the window: due retries first, then new rows.
            let now = Instant::now();
            let window = run.congestion.limit();
            while run.in_flight.has_room(window) {
                if let Some(r) = run.retries.pop_due(now) {
                    let token = match send(
                        &self.conn,
                        &self.inbox_prefix,
                        &mut self.next_token,
                        &r.message,
                        self.options.ack_timeout,
                    )
                    .await
                    {
                        Ok(token) => token,
                        Err(e) => {
                            run.fail_unsent(r.row, &e);
                            break 'run Some(e.context(format!("row {}", r.row)));
                        }
                    };
                    run.in_flight.push(
                        token,
                        r.row,
                        r.attempt,
                        r.message,
                        r.conflict,
                        self.options.ack_timeout,
                    );
                    continue;
                }
                if stop.is_some() || run.gate.is_some_and(|g| g < source.taken) {
                    break;
                }
                if !run
                    .in_flight
                    .has_room_for_new(window, run.retries.len(), run.retries.bytes())
                {
                    break;
                }
                let (index, message) = match self.next_message(source, run.outcome, id_base) {
                    Ok(Some(next)) => next,
                    Ok(None) => break,
                    Err(e) => {
                        stop = Some(e);
                        break;
                    }
                };
                let token = match send(
                    &self.conn,
                    &self.inbox_prefix,
                    &mut self.next_token,
                    &message,
                    self.options.ack_timeout,
                )
                .await
                {
                    Ok(token) => token,
                    Err(e) => {
                        run.fail_unsent(index, &e);
                        break 'run Some(e.context(format!("row {index}")));
                    }
                };
                run.in_flight
                    .push(token, index, 0, message, None, self.options.ack_timeout);
            }
            if self.options.on_full == OnFull::Fail
                && run.in_flight.len() >= window
                && stop.is_none()
            {
                refuse_rest(source, run.outcome, window)?;
            }
            let input_done = source.exhausted || stop.is_some();
            if run.is_idle() && input_done {
                break 'run None;
            }
            if run.is_idle() {
                if let Some(g) = run.gate {
                    // The gated first row failed: nothing else may be sent.
                    let why = format!(
                        "not sent: row {g} failed its expected-last check ({})",
                        run.outcome.error(g).unwrap_or("?")
                    );
                    refuse_all(source, run.outcome, &why)?;
                    break 'run None;
                }
            }

            // 2. Wait for acks, the oldest deadline, or the next retry.
            let wake = run.next_wake();
            tokio::select! {
                ack = self.acks.next() => match ack {
                    Some(ack) => run.on_ack(ack, self.next_token),
                    None => break 'run Some(Error::connection(
                        "the connection was closed for good (see option 'max_reconnects')",
                    )),
                },
                _ = tokio::time::sleep_until(wake) => {}
            }
            // Take every ack already here before sending more.
            while let Some(Some(ack)) = self.acks.next().now_or_never() {
                run.on_ack(ack, self.next_token);
            }
            let gave_up = run.expire();
            down_since = match (self.conn.is_connected(), down_since) {
                (true, _) => None,
                (false, since) => Some(since.unwrap_or_else(Instant::now)),
            };
            let down_too_long =
                down_since.is_some_and(|since| since.elapsed() >= self.options.ack_timeout);
            if gave_up && stop.is_none() && down_too_long {
                // Rows are given up while the connection has been down for longer than
                // an ack may take: stop taking new rows, or each window of them would
                // wait out its retries in turn. An expiry alone is no reason (the rows
                // may have been lost in an earlier outage that is over, or in one the
                // retries will outlast); what is in flight is still resent (with msg
                // ids) should the connection come back before its retries run out.
                stop = Some(Error::connection(format!(
                    "the connection to the server was lost for longer than {:?} \
                     (option 'ack_timeout') and rows ran out of retries \
                     (option 'max_retries'); rows after row {} were not sent",
                    self.options.ack_timeout,
                    source.taken.saturating_sub(1)
                )));
            }
        };
        if let Some(e) = lost {
            // Acks that arrived before the connection went are taken first (all of
            // them: tokio's cooperative budget would make the subscription look empty
            // after 128 in one go); whatever still awaits its ack or its resend is
            // then reported.
            while let Some(Some(ack)) = tokio::task::unconstrained(self.acks.next()).now_or_never()
            {
                run.on_ack(ack, self.next_token);
            }
            run.abandon(&e);
            return Err(e);
        }
        match stop {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
