//! What a JSON payload holds that its value schema has no place for: a field the
//! schema lacks (at any depth), or a value where the schema has the null type, as
//! `arrow-json` infers a field that was null in every sampled payload (an empty array's
//! items likewise). Either is data a schema inferred from a sample would lose.
//!
//! Walked only for a payload that failed to decode with `arrow-json`'s strict mode
//! (`on_new_field` `fail`), to tell such a field from a value of the wrong type: the
//! payload is parsed whole, which costs nothing on payloads that decode.

use arrow_schema::{DataType, Fields, SchemaRef};
use serde_json::Value;

/// The path (`a`, `a.b`, `items[].c`) of the first place of `payload` the schema has
/// no place for; None when there is none, or the payload is not a JSON object (it is
/// malformed then, for the decoder to say why).
pub(super) fn first_new_field(schema: &SchemaRef, payload: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(payload).ok()?;
    let Value::Object(_) = value else {
        return None;
    };
    in_struct(schema.fields(), &value, "")
}

fn in_struct(fields: &Fields, value: &Value, path: &str) -> Option<String> {
    let Value::Object(object) = value else {
        return None;
    };
    for (name, inner) in object {
        let here = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        match fields.iter().find(|f| f.name() == name) {
            None => return Some(here),
            Some(field) => {
                if let Some(found) = in_type(field.data_type(), inner, &here) {
                    return Some(found);
                }
            }
        }
    }
    None
}

fn in_type(data_type: &DataType, value: &Value, path: &str) -> Option<String> {
    match (data_type, value) {
        (_, Value::Null) => None,
        (DataType::Null, _) => Some(path.to_string()),
        (DataType::Struct(fields), _) => in_struct(fields, value, path),
        (
            DataType::List(item)
            | DataType::LargeList(item)
            | DataType::ListView(item)
            | DataType::LargeListView(item)
            | DataType::FixedSizeList(item, _),
            Value::Array(items),
        ) => {
            let path = format!("{path}[]");
            items
                .iter()
                .find_map(|v| in_type(item.data_type(), v, &path))
        }
        (DataType::Map(entries, _), Value::Object(object)) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                let path = format!("{path}[]");
                object
                    .values()
                    .find_map(|v| in_type(kv[1].data_type(), v, &path))
            }
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::{Field, Schema};

    use super::*;

    fn schema(fields: Vec<Field>) -> SchemaRef {
        Arc::new(Schema::new(fields))
    }

    #[test]
    fn names_a_field_the_schema_lacks_at_any_depth() {
        let s = schema(vec![
            Field::new("a", DataType::Int64, true),
            Field::new(
                "s",
                DataType::Struct(vec![Field::new("x", DataType::Int64, true)].into()),
                true,
            ),
            Field::new(
                "items",
                DataType::List(Arc::new(Field::new(
                    "item",
                    DataType::Struct(Fields::empty()),
                    true,
                ))),
                true,
            ),
        ]);
        assert_eq!(first_new_field(&s, br#"{"a": 1, "s": {"x": 2}}"#), None);
        assert_eq!(
            first_new_field(&s, br#"{"a": 1, "discount": 0.5}"#).as_deref(),
            Some("discount")
        );
        assert_eq!(
            first_new_field(&s, br#"{"s": {"x": 2, "y": 3}}"#).as_deref(),
            Some("s.y")
        );
        assert_eq!(
            first_new_field(&s, br#"{"items": [{}, {"c": 1}]}"#).as_deref(),
            Some("items[].c")
        );
        // A value of another type is malformed, not new.
        assert_eq!(first_new_field(&s, br#"{"a": "x", "s": 4}"#), None);
        assert_eq!(first_new_field(&s, b"[1]"), None);
    }

    #[test]
    fn names_a_value_where_the_schema_has_only_nulls() {
        let s = schema(vec![
            Field::new("n", DataType::Null, true),
            Field::new(
                "l",
                DataType::List(Arc::new(Field::new("item", DataType::Null, true))),
                true,
            ),
        ]);
        assert_eq!(first_new_field(&s, br#"{"n": null, "l": [null]}"#), None);
        assert_eq!(first_new_field(&s, br#"{"n": 5}"#).as_deref(), Some("n"));
        assert_eq!(
            first_new_field(&s, br#"{"l": [1]}"#).as_deref(),
            Some("l[]")
        );
    }
}
