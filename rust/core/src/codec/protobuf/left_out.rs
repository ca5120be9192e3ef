//! Values `prost-reflect` would leave out of a payload, which would read back as
//! something else. Its encoding skips a field without presence (proto3, not
//! `optional`) that holds its default, and -0.0 equals the default 0.0: at the top
//! level such a -0.0 is written after the message ([`MinusZeros`]), below it (inside a
//! nested message, as a map's value, in a wrapper given as its bare value) the row is
//! refused ([`value_left_out`]), as is a null map value, whose entry would be dropped.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, StructArray};
use arrow_schema::DataType;
use prost_reflect::MessageDescriptor;

/// A float or double field without presence (proto3, not `optional`) whose value is
/// -0.0: `prost-reflect` takes it for the default (it equals 0.0) and leaves it out,
/// which reads back as 0.0; it is written after the message, as protobuf's own
/// runtimes write it (a later occurrence of a field is its value).
pub(super) struct MinusZeros {
    /// Per top-level field of the kind: its column (as float64) and descriptor.
    fields: Vec<(arrow_array::Float64Array, prost_reflect::FieldDescriptor)>,
}

impl MinusZeros {
    pub(super) fn of(message: &MessageDescriptor, values: &StructArray) -> Self {
        use prost_reflect::Kind;
        let fields = values
            .fields()
            .iter()
            .zip(values.columns())
            .filter_map(|(field, column)| {
                let proto = message
                    .get_field_by_name(field.name())
                    .or_else(|| message.get_field_by_json_name(field.name()))?;
                let float = matches!(proto.kind(), Kind::Float | Kind::Double);
                if !float || proto.is_list() || proto.is_map() || proto.supports_presence() {
                    return None;
                }
                let wide = arrow_cast::cast(column, &DataType::Float64).ok()?;
                Some((
                    wide.as_primitive::<arrow_array::types::Float64Type>()
                        .clone(),
                    proto,
                ))
            })
            .collect();
        Self { fields }
    }

    pub(super) fn append(&self, row: usize, out: &mut Vec<u8>) {
        use prost::encoding::{encode_key, WireType};
        for (column, proto) in &self.fields {
            let v = column.value(row);
            if !column.is_valid(row) || v != 0.0 || v.is_sign_positive() {
                continue;
            }
            if proto.kind() == prost_reflect::Kind::Float {
                encode_key(proto.number(), WireType::ThirtyTwoBit, out);
                out.extend_from_slice(&(-0.0f32).to_le_bytes());
            } else {
                encode_key(proto.number(), WireType::SixtyFourBit, out);
                out.extend_from_slice(&(-0.0f64).to_le_bytes());
            }
        }
    }
}

/// Each element of a nested array: the input row it belongs to, or None under a null.
pub(super) type RowsOf = Vec<Option<usize>>;

/// A list-like column's values, and each element's row: the row of its list, or None
/// under a null list (or one outside every list).
fn items_of(column: &dyn Array, rows: &RowsOf) -> Option<(arrow_array::ArrayRef, RowsOf)> {
    // Each list's range of values.
    fn between<O: arrow_array::OffsetSizeTrait>(offsets: &[O]) -> Vec<(usize, usize)> {
        offsets
            .windows(2)
            .map(|w| (w[0].as_usize(), w[1].as_usize()))
            .collect()
    }
    let (values, ranges): (arrow_array::ArrayRef, Vec<(usize, usize)>) =
        if let Some(list) = column.as_list_opt::<i32>() {
            (list.values().clone(), between(list.offsets()))
        } else if let Some(list) = column.as_list_opt::<i64>() {
            (list.values().clone(), between(list.offsets()))
        } else if let Some(list) = column.as_fixed_size_list_opt() {
            let n = list.value_length() as usize;
            let ranges = (0..list.len()).map(|i| (i * n, i * n + n)).collect();
            (list.values().clone(), ranges)
        } else if let Some(list) = column.as_list_view_opt::<i32>() {
            let ranges = (0..list.len())
                .map(|i| {
                    let start = list.value_offsets()[i] as usize;
                    (start, start + list.value_sizes()[i] as usize)
                })
                .collect();
            (list.values().clone(), ranges)
        } else if let Some(map) = column.as_map_opt() {
            (
                Arc::new(map.entries().clone()) as arrow_array::ArrayRef,
                between(map.offsets()),
            )
        } else {
            return None;
        };
    let mut items = vec![None; values.len()];
    for (i, (row, (start, end))) in rows.iter().zip(ranges).enumerate() {
        if row.is_some() && column.is_valid(i) {
            for item in &mut items[start..end] {
                *item = *row;
            }
        }
    }
    Some((values, items))
}

/// A value the encoder would leave out of a payload: it is refused, not changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LeftOut {
    /// -0.0 in a float or double field without presence inside a nested message (the
    /// top level's are written by [`MinusZeros`]) or as a map's value: `prost-reflect`
    /// takes it for the default there, and it reads back 0.0.
    MinusZero,
    /// A null as a map's value: a map entry holds a value, so the entry is left out.
    NullMapValue,
}

impl LeftOut {
    pub(super) fn why(self) -> &'static str {
        match self {
            LeftOut::MinusZero => {
                "holds -0.0 in a float field without presence inside a message or as a \
                 map's value, which Protobuf's encoding leaves out as the default (it would \
                 read back 0.0); declare the field `optional` or write 0.0"
            }
            LeftOut::NullMapValue => {
                "holds a map entry whose value is null, which a Protobuf map cannot hold \
                 (the entry would be left out); give the entry a value or drop it"
            }
        }
    }
}

/// The first row holding a value the encoder would leave out ([`LeftOut`]), with
/// the column's path.
pub(super) fn value_left_out(
    message: &MessageDescriptor,
    values: &StructArray,
    rows: &RowsOf,
    path: &str,
    top: bool,
) -> Option<(String, usize, LeftOut)> {
    use prost_reflect::Kind;
    // A null message (a list's item, a map's value) has no fields.
    let rows: RowsOf = rows
        .iter()
        .enumerate()
        .map(|(i, r)| r.filter(|_| values.is_valid(i)))
        .collect();
    for (field, column) in values.fields().iter().zip(values.columns()) {
        let Some(proto) = message
            .get_field_by_name(field.name())
            .or_else(|| message.get_field_by_json_name(field.name()))
        else {
            continue;
        };
        let name = if path.is_empty() {
            field.name().clone()
        } else {
            format!("{path}.{}", field.name())
        };
        let rows: RowsOf = rows
            .iter()
            .enumerate()
            .map(|(i, r)| r.filter(|_| column.is_valid(i)))
            .collect();
        let found = match proto.kind() {
            Kind::Float | Kind::Double
                if !top && !proto.is_list() && !proto.supports_presence() =>
            {
                minus_zero_at(column.as_ref(), &rows).map(|row| (name, row, LeftOut::MinusZero))
            }
            // A wrapper given as its bare value (protobuf's JSON mapping writes
            // `DoubleValue` and `FloatValue` as numbers): its `value` has no presence.
            Kind::Message(inner) if is_bare_wrapper(&inner, column.as_ref()) => {
                if proto.is_list() {
                    items_of(column.as_ref(), &rows).and_then(|(values, items)| {
                        minus_zero_at(values.as_ref(), &items)
                            .map(|row| (name.clone(), row, LeftOut::MinusZero))
                    })
                } else {
                    minus_zero_at(column.as_ref(), &rows).map(|row| (name, row, LeftOut::MinusZero))
                }
            }
            Kind::Message(entry) if proto.is_map() => {
                items_of(column.as_ref(), &rows).and_then(|(entries, items)| {
                    let values = entries.as_struct_opt()?.column(1).clone();
                    let values = values.as_ref();
                    let null_value = items
                        .iter()
                        .enumerate()
                        .find_map(|(i, row)| row.filter(|_| values.is_null(i)));
                    if let Some(row) = null_value {
                        return Some((name.clone(), row, LeftOut::NullMapValue));
                    }
                    match entry.map_entry_value_field().kind() {
                        Kind::Float | Kind::Double => minus_zero_at(values, &items)
                            .map(|row| (name.clone(), row, LeftOut::MinusZero)),
                        Kind::Message(inner) if is_bare_wrapper(&inner, values) => {
                            minus_zero_at(values, &items)
                                .map(|row| (name.clone(), row, LeftOut::MinusZero))
                        }
                        Kind::Message(inner) => values.as_struct_opt().and_then(|v| {
                            value_left_out(&inner, v, &items, &format!("{name}[]"), false)
                        }),
                        _ => None,
                    }
                })
            }
            Kind::Message(inner) if proto.is_list() => {
                items_of(column.as_ref(), &rows).and_then(|(values, items)| {
                    value_left_out(
                        &inner,
                        values.as_struct_opt()?,
                        &items,
                        &format!("{name}[]"),
                        false,
                    )
                })
            }
            Kind::Message(inner) => column
                .as_struct_opt()
                .and_then(|v| value_left_out(&inner, v, &rows, &name, false)),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// A `DoubleValue` or `FloatValue` given as its bare value, as protobuf's JSON
/// mapping writes these wrappers (numbers): their `value` has no presence.
fn is_bare_wrapper(message: &MessageDescriptor, column: &dyn Array) -> bool {
    column.as_struct_opt().is_none()
        && matches!(
            message.full_name(),
            "google.protobuf.DoubleValue" | "google.protobuf.FloatValue"
        )
}

/// The row of the first -0.0 of a float column among elements with a row.
fn minus_zero_at(column: &dyn Array, rows: &RowsOf) -> Option<usize> {
    // Null values are not -0.0 (their slots may hold anything).
    let wide = arrow_cast::cast(column, &DataType::Float64).ok()?;
    let wide = wide.as_primitive::<arrow_array::types::Float64Type>();
    rows.iter().enumerate().find_map(|(i, row)| {
        let v = wide.value(i);
        (wide.is_valid(i) && v == 0.0 && v.is_sign_negative()).then_some(*row)?
    })
}
