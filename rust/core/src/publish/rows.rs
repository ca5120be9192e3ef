//! The rows of a publish call, taken one at a time from the input batches (checked
//! against the message schema as each batch arrives), and the rows refused unsent.

use arrow_array::RecordBatch;

use super::outcome::PublishOutcome;
use crate::compression::Compression;
use crate::error::Result;
use crate::publish::input::PublishBatch;

/// Pulls rows out of the input batches one at a time.
pub(super) struct RowSource<I> {
    pub batches: I,
    pub current: Option<(PublishBatch, usize)>,
    pub subject: Option<String>,
    pub max_subject: usize,
    /// Each batch's payloads compressed as it is taken ([`PublishBatch::precompress`]).
    pub compression: Option<Compression>,
    /// Rows taken so far in this call.
    pub taken: usize,
    pub exhausted: bool,
}

impl<I: Iterator<Item = Result<RecordBatch>>> RowSource<I> {
    /// The next row as (row index within the call, its batch, row within the batch).
    /// New rows are registered in `outcome` as they are reached.
    pub(super) fn next_row(
        &mut self,
        outcome: &mut PublishOutcome,
    ) -> Result<Option<(usize, &PublishBatch, usize)>> {
        loop {
            if self.exhausted {
                return Ok(None);
            }
            let needs_batch = match &self.current {
                Some((batch, next)) => *next >= batch.num_rows(),
                None => true,
            };
            if needs_batch {
                match self.batches.next() {
                    None => {
                        self.exhausted = true;
                        return Ok(None);
                    }
                    Some(batch) => {
                        let batch = batch.map_err(|e| e.context("reading the input"))?;
                        let mut checked =
                            PublishBatch::new(&batch, self.subject.as_deref(), self.max_subject)?;
                        if let Some(compression) = self.compression {
                            checked.precompress(compression)?;
                        }
                        outcome.add_rows(checked.num_rows());
                        self.current = Some((checked, 0));
                    }
                }
                continue;
            }
            let (batch, next) = self.current.as_mut().expect("a current batch");
            let row = *next;
            *next += 1;
            let index = self.taken;
            self.taken += 1;
            return Ok(Some((index, batch, row)));
        }
    }
}

pub(super) fn refuse_rest<I: Iterator<Item = Result<RecordBatch>>>(
    source: &mut RowSource<I>,
    outcome: &mut PublishOutcome,
    window: usize,
) -> Result<()> {
    let why = format!("not sent: the ack window of {window} messages was full (on_full='fail')");
    refuse_all(source, outcome, &why)
}

pub(super) fn refuse_all<I: Iterator<Item = Result<RecordBatch>>>(
    source: &mut RowSource<I>,
    outcome: &mut PublishOutcome,
    why: &str,
) -> Result<()> {
    while let Some((index, _, _)) = source.next_row(outcome)? {
        outcome.fail(index, why.to_string());
    }
    Ok(())
}
