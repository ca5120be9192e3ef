//! What became of each row of a publish call: stored (with its sequence), a
//! duplicate, or failed with its reason; as counts and as an Arrow batch.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

use crate::arrow::schema::ack_schema;
use crate::events;

/// What happened to each row of one publish call.
#[derive(Debug, Default)]
pub struct PublishOutcome {
    /// Stream sequence per row; 0 while pending or when failed.
    seqs: Vec<u64>,
    duplicate: Vec<bool>,
    /// Rows acked or failed; the others are still in flight or not yet sent.
    resolved: Vec<bool>,
    errors: HashMap<usize, String>,
    /// The JetStream error code of each failed row the server refused with one.
    error_codes: HashMap<usize, u32>,
    /// A publish of counter increments: each row's new counter value, as the ack
    /// said it (decimal text), is reported in a `value` column.
    values: Option<HashMap<usize, String>>,
    pub stored: usize,
    pub duplicates: usize,
    /// Rows sent again (after an ack timeout, a `429`/`503`, a lost connection).
    pub resends: usize,
    /// Acks that came after their row was resent or resolved, dropped.
    pub late_replies: usize,
    /// Whether the server's pushing back was told (once per call).
    pushed_back_told: bool,
}

impl PublishOutcome {
    pub fn rows(&self) -> usize {
        self.seqs.len()
    }

    pub fn failed(&self) -> usize {
        self.errors.len()
    }

    /// The error of `row`, if it failed.
    pub fn error(&self, row: usize) -> Option<&str> {
        self.errors.get(&row).map(String::as_str)
    }

    pub fn seq(&self, row: usize) -> Option<u64> {
        Some(self.seqs[row]).filter(|&s| s > 0)
    }

    pub(super) fn add_rows(&mut self, n: usize) {
        self.seqs.resize(self.seqs.len() + n, 0);
        self.duplicate.resize(self.duplicate.len() + n, false);
        self.resolved.resize(self.resolved.len() + n, false);
    }

    pub(super) fn acked(&mut self, row: usize, seq: u64, duplicate: bool) {
        self.resolved[row] = true;
        self.seqs[row] = seq;
        if duplicate {
            self.duplicate[row] = true;
            self.duplicates += 1;
        } else {
            self.stored += 1;
        }
    }

    /// The call publishes counter increments: the acks' values are kept.
    pub(super) fn count_values(&mut self) {
        self.values.get_or_insert_with(HashMap::new);
    }

    /// The counter's new value after `row`'s increment (the ack's `val`).
    pub(super) fn counted(&mut self, row: usize, value: String) {
        if let Some(values) = &mut self.values {
            values.insert(row, value);
        }
    }

    /// The counter's value after `row`'s increment, if the call published
    /// increments and the row's ack said it.
    pub fn value(&self, row: usize) -> Option<&str> {
        self.values.as_ref()?.get(&row).map(String::as_str)
    }

    /// `count` rows, from `row` on, are sent again for `why`: counted, and the first
    /// of the call told.
    pub(super) fn resent(&mut self, row: usize, count: usize, why: &str) {
        if self.resends == 0 {
            events::first_resend(row, why);
        }
        self.resends += count;
    }

    /// The server answered `429` or `503` (told once per call).
    pub(super) fn pushed_back(&mut self, why: &str) {
        if !std::mem::replace(&mut self.pushed_back_told, true) {
            events::pushed_back(why);
        }
    }

    pub(super) fn late_reply(&mut self) {
        self.late_replies += 1;
    }

    /// At the end of a call: its resends and late replies, if any.
    pub(super) fn tell_summary(&self) {
        if self.resends > 0 || self.late_replies > 0 {
            events::publish_summary(self.rows(), self.resends, self.late_replies);
        }
    }

    pub(super) fn fail(&mut self, row: usize, why: String) {
        self.resolved[row] = true;
        self.errors.insert(row, why);
        self.error_codes.remove(&row);
    }

    /// Row `row` failed for `why`, refused by the server with `err_code`.
    pub(super) fn fail_with_code(&mut self, row: usize, why: String, err_code: Option<u32>) {
        self.fail(row, why);
        if let Some(code) = err_code {
            self.error_codes.insert(row, code);
        }
    }

    /// The JetStream error code `row` failed with, when the server gave one.
    pub fn error_code(&self, row: usize) -> Option<u32> {
        self.error_codes.get(&row).copied()
    }

    /// Each row's JetStream error code (uint32, null unless the row failed with
    /// one), for callers that act on why rows failed without reading the words.
    pub fn error_codes(&self) -> arrow_array::UInt32Array {
        (0..self.rows()).map(|row| self.error_code(row)).collect()
    }

    /// Every row neither acked nor failed yet fails for `why`: the call is over, so
    /// each row of its input read so far ends stored, duplicate or failed.
    pub(super) fn fail_unresolved(&mut self, why: &str) {
        for row in 0..self.rows() {
            if !self.resolved[row] {
                self.fail(row, why.to_string());
            }
        }
    }

    /// `seq` (int64, null unless acked), `duplicate` (bool), `error` (utf8, null when
    /// ok); for a publish of counter increments also `value` (utf8: the counter's
    /// new value as decimal text, null for a duplicate or a failed row).
    pub fn to_record_batch(&self) -> RecordBatch {
        let n = self.rows();
        let mut seq = Int64Builder::with_capacity(n);
        let mut dup = BooleanBuilder::with_capacity(n);
        let mut err = StringBuilder::with_capacity(n, 0);
        for row in 0..n {
            match self.seqs[row] {
                0 => seq.append_null(),
                s => seq.append_value(s as i64),
            }
            dup.append_value(self.duplicate[row]);
            err.append_option(self.errors.get(&row));
        }
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(seq.finish()),
            Arc::new(dup.finish()),
            Arc::new(err.finish()),
        ];
        let mut schema = ack_schema();
        if let Some(values) = &self.values {
            let mut value = StringBuilder::with_capacity(n, 0);
            for row in 0..n {
                value.append_option(values.get(&row));
            }
            columns.push(Arc::new(value.finish()));
            let mut fields: Vec<Field> =
                schema.fields().iter().map(|f| f.as_ref().clone()).collect();
            fields.push(Field::new("value", DataType::Utf8, true));
            schema = Arc::new(Schema::new(fields));
        }
        RecordBatch::try_new(schema, columns).expect("ack columns match ack_schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_reports_each_row() {
        let mut o = PublishOutcome::default();
        o.add_rows(3);
        o.acked(0, 5, false);
        o.acked(2, 4, true);
        o.fail(1, "bad".into());
        let b = o.to_record_batch();
        assert_eq!(b.num_rows(), 3);
        assert_eq!((o.stored, o.duplicates, o.failed()), (1, 1, 1));
        assert_eq!(o.seq(1), None);
        assert_eq!(o.error(1), Some("bad"));
    }
}
