//! A row's own time to live: publish input's optional `ttl` column, sent as the
//! message's `Nats-TTL` header (servers 2.11 and later, on streams created with
//! `allow_msg_ttl`), after which the server removes the message.
//!
//! The server keeps a TTL in whole seconds, at least one: a duration column is sent
//! as its seconds, refused where it is not a whole number of them. Only a duration
//! column is a TTL ([`crate::arrow::schema::is_ttl_column`]): a `ttl` column of text
//! or numbers is one of the table's own columns (a value's field, say), which would
//! otherwise be taken out of the payload and expire the message. -1 s is `never` (the server's own
//! number for it, and what a read's `ttl` column gives for it), so a copy keeps it;
//! other text goes in the `headers` column as `Nats-TTL`.

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, PrimitiveArray};
use arrow_schema::{DataType, TimeUnit};
use async_nats::header::HeaderValue;

use crate::arrow::schema::TTL;
use crate::arrow::ttl::NEVER_SECONDS;
use crate::error::{Error, Result};

/// The `ttl` column of a batch of publish input: durations, as counts of
/// `per_second`ths of a second.
pub(super) struct TtlColumn {
    values: PrimitiveArray<Int64Type>,
    per_second: i64,
}

impl TtlColumn {
    /// The column, if `array` is one (see [`crate::arrow::schema::is_ttl_column`]).
    pub(super) fn new(array: &ArrayRef) -> Result<Option<Self>> {
        let DataType::Duration(unit) = array.data_type() else {
            return Ok(None);
        };
        let per_second = match unit {
            TimeUnit::Second => 1,
            TimeUnit::Millisecond => 1_000,
            TimeUnit::Microsecond => 1_000_000,
            TimeUnit::Nanosecond => 1_000_000_000,
        };
        let values = arrow_cast::cast(array, &DataType::Int64)?;
        Ok(Some(Self {
            values: values.as_primitive::<Int64Type>().clone(),
            per_second,
        }))
    }

    /// The `Nats-TTL` value of `row` (None: a null, no TTL of its own).
    pub(super) fn header(&self, row: usize, global_row: u64) -> Result<Option<HeaderValue>> {
        if self.values.is_null(row) {
            return Ok(None);
        }
        let (value, per_second) = (self.values.value(row), self.per_second);
        if value == NEVER_SECONDS * per_second {
            // What a read's `ttl` column says for `never`: written back as it.
            return Ok(Some(HeaderValue::from("never")));
        }
        if value % per_second != 0 || value < per_second {
            return Err(Error::bad_input(format!(
                "column '{TTL}', row {global_row}: the server keeps a TTL in whole seconds, \
                 at least 1 (or -1 s for never); got {value}/{per_second} s"
            )));
        }
        Ok(Some(HeaderValue::from(format!("{}s", value / per_second))))
    }
}
