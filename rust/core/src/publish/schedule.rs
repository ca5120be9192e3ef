//! Scheduled messages (ADR-51, servers 2.12 and later, streams created with
//! `allow_msg_schedules`): publish input's `schedule` and `schedule_target` columns,
//! sent as each row's `Nats-Schedule` and `Nats-Schedule-Target` headers. The server
//! stores the row as the schedule and, when it is due, publishes the row's payload
//! and headers (less the schedule's) to the target subject, a subject of the same
//! stream; a repeating schedule fires again until it is removed.
//!
//! A schedule is `@at <RFC 3339 instant>` (once), `@every <Go duration>` (at least
//! 1 s), a cron expression of six fields with seconds (`0 30 * * * *`) or one of the
//! predefined `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`. A timestamp
//! column is `@at` its instant. The server keeps one schedule per subject: a
//! later schedule on the schedule's subject replaces it.
//!
//! The columns are a schedule only together
//! ([`crate::arrow::schema::is_schedule_input`]): a `schedule` column without
//! `schedule_target` is the table's own (a value's field, say).

use arrow_array::cast::AsArray;
use arrow_array::types::TimestampNanosecondType;
use arrow_array::{Array, ArrayRef, PrimitiveArray, StringArray};
use arrow_schema::{DataType, TimeUnit};
use async_nats::header::HeaderValue;

use crate::arrow::schema::{SCHEDULE, SCHEDULE_TARGET};
use crate::error::{Error, Result};

/// The headers a schedule travels in.
pub const NATS_SCHEDULE: &str = "Nats-Schedule";
pub const NATS_SCHEDULE_TARGET: &str = "Nats-Schedule-Target";

enum When {
    /// Text the server reads as a schedule, sent as given.
    Text(StringArray),
    /// Instants (`@at`), in nanoseconds since the epoch, UTC; beside them the column
    /// as given, whose valid rows that are null here lie outside nanoseconds' range.
    Instants(PrimitiveArray<TimestampNanosecondType>, ArrayRef),
}

/// The `schedule` and `schedule_target` columns of a batch of publish input.
pub(super) struct ScheduleColumns {
    when: When,
    target: StringArray,
}

fn utf8(array: &ArrayRef, name: &str) -> Result<StringArray> {
    match array.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(..) => {
            let text = arrow_cast::cast(array, &DataType::Utf8)
                .map_err(|e| Error::bad_input(format!("column '{name}': {e}")))?;
            Ok(text.as_string::<i32>().clone())
        }
        other => Err(Error::bad_input(format!(
            "column '{name}' must be text, got {other}"
        ))),
    }
}

impl ScheduleColumns {
    pub(super) fn new(schedule: &ArrayRef, target: &ArrayRef) -> Result<Self> {
        Ok(Self {
            when: Self::when(schedule).map_err(|e| e.in_column(SCHEDULE))?,
            target: utf8(target, SCHEDULE_TARGET).map_err(|e| e.in_column(SCHEDULE_TARGET))?,
        })
    }

    /// When each row fires, from column `schedule`.
    fn when(schedule: &ArrayRef) -> Result<When> {
        Ok(match schedule.data_type() {
            DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64 => {
                let ns = arrow_cast::cast(
                    schedule,
                    // To UTC, not the local wall clock a cast to no zone gives.
                    &DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
                )
                .map_err(|e| Error::bad_input(format!("column '{SCHEDULE}': {e}")))?;
                // The cast turns an instant out of nanoseconds' range into a null, which
                // would send the row unscheduled, at once: refused by `headers`, which
                // knows the row's number in the whole input.
                When::Instants(
                    ns.as_primitive::<TimestampNanosecondType>().clone(),
                    schedule.clone(),
                )
            }
            DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Dictionary(..) => When::Text(utf8(schedule, SCHEDULE)?),
            other => {
                return Err(Error::bad_input(format!(
                    "column '{SCHEDULE}' must be text the server reads as a schedule ('@at \
                     2026-01-02T15:04:05Z', '@every 5m', a cron '0 30 * * * *') or a \
                     timestamp (fired at that instant), got {other}"
                )))
            }
        })
    }

    /// The `Nats-Schedule` and `Nats-Schedule-Target` values of `row` (None: a null
    /// schedule, a message sent as it is).
    pub(super) fn headers(
        &self,
        row: usize,
        global_row: u64,
    ) -> Result<Option<(HeaderValue, HeaderValue)>> {
        let schedule = match &self.when {
            When::Text(text) if text.is_valid(row) => {
                let value = text.value(row).trim();
                if value.is_empty() || value.contains(['\r', '\n']) {
                    return Err(Error::bad_input(format!(
                        "column '{SCHEDULE}', row {global_row}: {:?} is not a schedule",
                        text.value(row)
                    )));
                }
                value.to_string()
            }
            When::Instants(ns, given) if ns.is_null(row) && given.is_valid(row) => {
                return Err(Error::bad_input(format!(
                    "column '{SCHEDULE}', row {global_row}: the instant is outside what the \
                     server keeps (nanoseconds from 1970, the years 1678 to 2261)"
                )));
            }
            When::Instants(ns, _) if ns.is_valid(row) => {
                let at = time::OffsetDateTime::from_unix_timestamp_nanos(ns.value(row) as i128)
                    .map_err(|e| {
                        Error::bad_input(format!("column '{SCHEDULE}', row {global_row}: {e}"))
                    })?;
                let text = at
                    .format(&time::format_description::well_known::Rfc3339)
                    .map_err(|e| {
                        Error::bad_input(format!("column '{SCHEDULE}', row {global_row}: {e}"))
                    })?;
                format!("@at {text}")
            }
            _ => return Ok(None),
        };
        if self.target.is_null(row) || self.target.value(row).is_empty() {
            return Err(Error::bad_input(format!(
                "column '{SCHEDULE_TARGET}', row {global_row}: a scheduled row needs the subject \
                 it fires to"
            )));
        }
        let target = self.target.value(row);
        if target.contains([' ', '\t', '\r', '\n', '*', '>']) {
            return Err(Error::bad_input(format!(
                "column '{SCHEDULE_TARGET}', row {global_row}: {target:?} is not a subject to \
                 publish to"
            )));
        }
        Ok(Some((
            HeaderValue::from(schedule.as_str()),
            HeaderValue::from(target),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::TimestampMillisecondArray;
    use std::sync::Arc;

    #[test]
    fn schedules_are_headers() {
        let when: ArrayRef = Arc::new(TimestampMillisecondArray::from(vec![
            Some(1_767_225_600_500),
            None,
        ]));
        let target: ArrayRef = Arc::new(StringArray::from(vec![Some("t.a"), None]));
        let c = ScheduleColumns::new(&when, &target).unwrap();
        let (s, t) = c.headers(0, 0).unwrap().unwrap();
        assert_eq!(s.as_str(), "@at 2026-01-01T00:00:00.5Z");
        assert_eq!(t.as_str(), "t.a");
        assert!(c.headers(1, 1).unwrap().is_none());

        let text: ArrayRef = Arc::new(StringArray::from(vec!["@every 1s", "@every 1s"]));
        let c = ScheduleColumns::new(&text, &target).unwrap();
        assert_eq!(c.headers(0, 0).unwrap().unwrap().0.as_str(), "@every 1s");
        let err = c.headers(1, 9).unwrap_err().to_string();
        assert!(err.contains("'schedule_target', row 9"), "{err}");
    }
}
