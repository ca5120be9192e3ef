//! Counter increments (ADR-49, servers 2.12 and later, streams created with
//! `allow_msg_counter`): publish input's `increment` column, sent as each row's
//! `Nats-Incr` header with an empty payload. The server adds it to the subject's
//! counter, stores `{"val":"<decimal>"}` and acks with the new value (`val`).
//!
//! A table is one of increments when it has an `increment` column and no `data`
//! column, and the call encodes no values: a table with a
//! payload keeps an `increment` column as its own (a value's field), as before.
//!
//! The server counts in arbitrary precision. An increment is an integer column, a
//! decimal column (of whole values) or decimal text (`"+5"`, `"-3"`,
//! `"123456789012345678901234567890"`): never a float, which cannot say every
//! integer it appears to.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, StringArray};
use arrow_schema::DataType;
use async_nats::header::HeaderValue;

use crate::arrow::schema::INCREMENT;
use crate::error::{Error, Result};

/// The header a counter increment travels in.
pub const NATS_INCR: &str = "Nats-Incr";

/// The `increment` column of a batch of publish input, as decimal text.
pub(super) struct IncrementColumn {
    text: StringArray,
    /// The column is decimal with this scale: its text ends in `.` and as many zeros.
    scale: usize,
}

impl IncrementColumn {
    pub(super) fn new(array: &ArrayRef) -> Result<Self> {
        let mut scale = 0;
        match array.data_type() {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View => {}
            DataType::Decimal128(_, s) | DataType::Decimal256(_, s) => {
                if *s < 0 {
                    // A negative scale: cast to a scale of 0 first (whole values), as
                    // a decimal256, which holds every decimal128 of any scale; a value
                    // past it is an error, not the null a safe cast would make it.
                    let cast = arrow_cast::cast_with_options(
                        array,
                        &DataType::Decimal256(76, 0),
                        &arrow_cast::CastOptions {
                            safe: false,
                            ..Default::default()
                        },
                    )
                    .map_err(|e| Error::bad_input(format!("column '{INCREMENT}': {e}")))?;
                    return Self::new(&cast);
                }
                scale = *s as usize;
            }
            DataType::Float16 | DataType::Float32 | DataType::Float64 => {
                return Err(Error::bad_input(format!(
                    "column '{INCREMENT}' is {}: a counter increment is never a float (it \
                     cannot say every integer it appears to); give integers, decimals or \
                     decimal text",
                    array.data_type()
                )))
            }
            other => {
                return Err(Error::bad_input(format!(
                    "column '{INCREMENT}' must be an integer, a decimal of whole values or \
                     decimal text ('+5', '-3'), got {other}"
                )))
            }
        }
        let text = arrow_cast::cast(array, &DataType::Utf8)
            .map_err(|e| Error::bad_input(format!("column '{INCREMENT}': {e}")))?;
        Ok(Self {
            text: text.as_string::<i32>().clone(),
            scale,
        })
    }

    /// The `Nats-Incr` value of `row`.
    pub(super) fn header(&self, row: usize, global_row: u64) -> Result<HeaderValue> {
        if self.text.is_null(row) {
            return Err(Error::bad_input(format!(
                "column '{INCREMENT}', row {global_row}: the increment is null (a counter \
                 stream stores increments only; give 0 to leave a counter as it is)"
            )));
        }
        let given = self.text.value(row);
        let mut value = given.trim();
        if self.scale > 0 {
            // Arrow writes a decimal with all its scale's digits: "5.00".
            match value.split_once('.') {
                Some((whole, fraction)) if fraction.bytes().all(|b| b == b'0') => value = whole,
                _ => {
                    return Err(Error::bad_input(format!(
                        "column '{INCREMENT}', row {global_row}: {given} is not a whole \
                         number; a counter counts in integers"
                    )))
                }
            }
        }
        let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::bad_input(format!(
                "column '{INCREMENT}', row {global_row}: {given:?} is not an integer (decimal \
                 digits with an optional sign: '+5', '-3', '12')"
            )));
        }
        Ok(HeaderValue::from(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Decimal128Array, Float64Array, Int64Array};
    use std::sync::Arc;

    #[test]
    fn increments_are_decimal_text() {
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![Some(5), Some(-3), None]));
        let c = IncrementColumn::new(&ints).unwrap();
        assert_eq!(c.header(0, 0).unwrap().as_str(), "5");
        assert_eq!(c.header(1, 1).unwrap().as_str(), "-3");
        assert!(c.header(2, 2).unwrap_err().to_string().contains("row 2"));

        let dec: ArrayRef = Arc::new(
            Decimal128Array::from(vec![500, 250])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        );
        let c = IncrementColumn::new(&dec).unwrap();
        assert_eq!(c.header(0, 0).unwrap().as_str(), "5");
        assert!(c.header(1, 7).unwrap_err().to_string().contains("row 7"));

        let text: ArrayRef = Arc::new(StringArray::from(vec![
            "+123456789012345678901234567890",
            "1e3",
        ]));
        let c = IncrementColumn::new(&text).unwrap();
        assert_eq!(
            c.header(0, 0).unwrap().as_str(),
            "+123456789012345678901234567890"
        );
        assert!(c.header(1, 1).is_err());

        let floats: ArrayRef = Arc::new(Float64Array::from(vec![1.0]));
        let err = IncrementColumn::new(&floats).err().unwrap().to_string();
        assert!(
            err.contains("'increment'") && err.contains("float"),
            "{err}"
        );
    }
}
