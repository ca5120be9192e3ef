//! Which JSON tokens a typed field takes. `arrow-json` reads a fractional number
//! into an integer field by truncating it (`2.7` becomes 2), a string of digits
//! into a number field (`"12"` becomes 12), and drops a decimal's digits beyond its
//! scale. A payload is checked against the value's schema before it is decoded, so
//! such a token makes the payload malformed, naming its field, as Spark's JSON
//! reader refuses it, instead of a value changed without a word.
//!
//! An integer literal read into a float field is taken only when the float holds it
//! exactly: `arrow-json` rounds it to the nearest float, so 9007199254740993 read
//! into a float64 became 9007199254740992.
//!
//! Floats also take the strings `"NaN"`, `"Infinity"` and `"-Infinity"`: JSON has
//! no literal for them, and that is how the encoder (and Spark, and Jackson) write
//! them.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;

use arrow_schema::DataType;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The strings a float field takes for the values JSON has no number for.
pub(super) const NON_FINITE: [&str; 3] = ["NaN", "Infinity", "-Infinity"];

/// What the tokens at one place of the value must be; only the places that need a
/// check are kept.
#[derive(Debug)]
pub(super) enum TokenCheck {
    /// An integer literal within the field's range: the decoder underneath reads one
    /// past it through a float, so -2^63-1 became -2^63.
    Integer {
        min: i128,
        max: i128,
    },
    /// A float of this many bits of mantissa (the implicit one included).
    Float {
        mantissa_bits: u32,
    },
    Decimal {
        scale: i8,
    },
    /// An object, by the fields that need a check.
    Object(HashMap<String, TokenCheck>),
    /// An array's items.
    Items(Box<TokenCheck>),
    /// An object's values (an Arrow map).
    Values(Box<TokenCheck>),
}

impl TokenCheck {
    /// The check values of `data_type` need; None when `arrow-json` reads every token
    /// it accepts for it as given.
    pub fn for_type(data_type: &DataType) -> Option<Self> {
        use DataType as T;
        match data_type {
            T::Int8 => Some(Self::integer(i8::MIN, i8::MAX)),
            T::Int16 => Some(Self::integer(i16::MIN, i16::MAX)),
            T::Int32 => Some(Self::integer(i32::MIN, i32::MAX)),
            T::Int64 => Some(Self::integer(i64::MIN, i64::MAX)),
            T::UInt8 => Some(Self::integer(0, u8::MAX)),
            T::UInt16 => Some(Self::integer(0, u16::MAX)),
            T::UInt32 => Some(Self::integer(0, u32::MAX)),
            T::UInt64 => Some(Self::integer(0, u64::MAX)),
            T::Float16 => Some(Self::Float { mantissa_bits: 11 }),
            T::Float32 => Some(Self::Float { mantissa_bits: 24 }),
            T::Float64 => Some(Self::Float { mantissa_bits: 53 }),
            T::Decimal32(_, scale)
            | T::Decimal64(_, scale)
            | T::Decimal128(_, scale)
            | T::Decimal256(_, scale) => Some(Self::Decimal { scale: *scale }),
            T::Struct(fields) => {
                let checks: HashMap<String, TokenCheck> = fields
                    .iter()
                    .filter_map(|f| Self::for_type(f.data_type()).map(|c| (f.name().clone(), c)))
                    .collect();
                (!checks.is_empty()).then_some(Self::Object(checks))
            }
            T::List(item)
            | T::LargeList(item)
            | T::ListView(item)
            | T::LargeListView(item)
            | T::FixedSizeList(item, _) => {
                Self::for_type(item.data_type()).map(|c| Self::Items(Box::new(c)))
            }
            T::Map(entries, _) => match entries.data_type() {
                T::Struct(kv) if kv.len() == 2 => {
                    Self::for_type(kv[1].data_type()).map(|c| Self::Values(Box::new(c)))
                }
                _ => None,
            },
            T::Dictionary(_, values) => Self::for_type(values),
            _ => None,
        }
    }

    fn integer(min: impl Into<i128>, max: impl Into<i128>) -> Self {
        Self::Integer {
            min: min.into(),
            max: max.into(),
        }
    }

    /// Check one payload. Err names the field and the token; a payload that is not
    /// JSON at all passes, for the decoder to say what is wrong with it.
    pub fn check(&self, payload: &[u8]) -> Result<(), String> {
        let found = Cell::new(None);
        let mut de = serde_json::Deserializer::from_slice(payload);
        let seed = Seed {
            check: self,
            path: Path::Root,
            found: &found,
        };
        match seed.deserialize(&mut de) {
            Ok(()) => Ok(()),
            Err(_) => match found.take() {
                Some(why) => Err(why),
                None => Ok(()),
            },
        }
    }
}

/// Where a token is, built on the stack as the check descends; spelled only for an
/// error.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Field(&'a Path<'a>, &'a str),
    Item(&'a Path<'a>),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Field(Path::Root, name) => write!(f, "{name}"),
            Path::Field(parent, name) => write!(f, "{parent}.{name}"),
            Path::Item(parent) => write!(f, "{parent}[]"),
        }
    }
}

struct Seed<'c, 'p> {
    check: &'c TokenCheck,
    path: Path<'p>,
    found: &'c Cell<Option<String>>,
}

impl Seed<'_, '_> {
    fn refuse<E: serde::de::Error>(&self, why: String) -> E {
        self.found
            .set(Some(format!("field '{}': {why}", self.path)));
        E::custom("token refused")
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        match self.check {
            TokenCheck::Integer { .. } | TokenCheck::Float { .. } | TokenCheck::Decimal { .. } => {
                let raw = <&RawValue>::deserialize(deserializer)?;
                match scalar_problem(self.check, raw.get()) {
                    None => Ok(()),
                    Some(why) => Err(self.refuse(why)),
                }
            }
            _ => deserializer.deserialize_any(self),
        }
    }
}

/// Objects, arrays and nulls at a place that holds a container; any other token is
/// left for the decoder to refuse.
impl<'de> Visitor<'de> for Seed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object or array")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        match self.check {
            TokenCheck::Items(item) => {
                let path = Path::Item(&self.path);
                while seq
                    .next_element_seed(Seed {
                        check: item,
                        path,
                        found: self.found,
                    })?
                    .is_some()
                {}
            }
            _ => while seq.next_element::<IgnoredAny>()?.is_some() {},
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        match self.check {
            TokenCheck::Object(fields) => {
                while let Some(field) = map.next_key_seed(FieldLookup(fields))? {
                    match field {
                        Some((name, check)) => map.next_value_seed(Seed {
                            check,
                            path: Path::Field(&self.path, name),
                            found: self.found,
                        })?,
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
            }
            TokenCheck::Values(value) => {
                let path = Path::Item(&self.path);
                while map.next_key::<IgnoredAny>()?.is_some() {
                    map.next_value_seed(Seed {
                        check: value,
                        path,
                        found: self.found,
                    })?;
                }
            }
            _ => while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {},
        }
        Ok(())
    }
}

/// An object's key looked up among the fields to check, without copying it.
struct FieldLookup<'c>(&'c HashMap<String, TokenCheck>);

impl<'de, 'c> DeserializeSeed<'de> for FieldLookup<'c> {
    type Value = Option<(&'c str, &'c TokenCheck)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de, 'c> Visitor<'de> for FieldLookup<'c> {
    type Value = Option<(&'c str, &'c TokenCheck)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.get_key_value(key).map(|(k, c)| (k.as_str(), c)))
    }
}

/// Why `token` (a JSON value's text) does not fit `check`, if it does not.
fn scalar_problem(check: &TokenCheck, token: &str) -> Option<String> {
    let string = token.strip_prefix('"').and_then(|t| t.strip_suffix('"'));
    let is_number = token.starts_with(|c: char| c == '-' || c.is_ascii_digit());
    match check {
        TokenCheck::Integer { min, max } => match string {
            Some(_) => Some(format!("the string {token} is not an integer")),
            None if is_number && token.contains(['.', 'e', 'E']) => {
                Some(format!("{token} is not an integer"))
            }
            None if is_number => match token.parse::<i128>() {
                Ok(n) if (*min..=*max).contains(&n) => None,
                _ => Some(format!("{token} is out of the field's range {min}..={max}")),
            },
            None => None,
        },
        TokenCheck::Float { mantissa_bits } => match string {
            Some(s) if !NON_FINITE.contains(&s) => Some(format!(
                "the string {token} is not a number (strings taken: {})",
                NON_FINITE.map(|s| format!("\"{s}\"")).join(", ")
            )),
            None if is_number
                && !token.contains(['.', 'e', 'E'])
                && !whole_fits_float(token, *mantissa_bits) =>
            {
                Some(format!(
                    "the integer {token} is not held exactly by the field's float type \
                     (it would be rounded); read the field as a decimal or an integer"
                ))
            }
            _ => None,
        },
        TokenCheck::Decimal { scale } if *scale < 0 => (token != "null").then(|| {
            format!(
                "a decimal of negative scale ({scale}) is not read from JSON: the decoder \
                 underneath reads {token} as {token} units of 10^{}; read it with a scale \
                 of 0 or more",
                -scale
            )
        }),
        TokenCheck::Decimal { scale } => {
            let digits = string.unwrap_or(token);
            let fractional = fractional_digits(digits)?;
            (fractional > i64::from(*scale)).then(|| {
                format!(
                    "{token} has {fractional} digits after the point, more than the decimal's \
                     scale {scale}"
                )
            })
        }
        _ => None,
    }
}

/// Whether the integer literal `digits` is a value of a float with `mantissa_bits`
/// bits of mantissa: its significant bits (trailing zero bits aside) fit them, and it
/// is within the float's range.
fn whole_fits_float(digits: &str, mantissa_bits: u32) -> bool {
    let magnitude = digits.strip_prefix('-').unwrap_or(digits);
    let Ok(n) = magnitude.parse::<u128>() else {
        // Beyond 2^128: past float16's and float32's range; a float64 holds it when
        // its exact decimal expansion is the literal (leading zeros aside, which JSON
        // does not allow anyway).
        return mantissa_bits == 53
            && magnitude
                .parse::<f64>()
                .is_ok_and(|f| f.is_finite() && format!("{f:.0}") == magnitude);
    };
    if n == 0 {
        return true;
    }
    let significant = 128 - n.leading_zeros() - n.trailing_zeros();
    let max_exponent_bits = match mantissa_bits {
        11 => 16, // float16's largest finite value is below 2^16
        24 => 128,
        _ => 1024,
    };
    significant <= mantissa_bits && 128 - n.leading_zeros() <= max_exponent_bits
}

/// How many digits after the point a decimal number spells, trailing zeros not
/// counted and the exponent applied: negative for a whole number ending in zeros
/// (`12300` is -2, which a decimal of scale -2 holds); None when `number` is not one.
fn fractional_digits(number: &str) -> Option<i64> {
    let unsigned = number.strip_prefix(['-', '+']).unwrap_or(number);
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i64>().ok()?),
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() && fraction.is_empty()
        || !(whole.bytes().all(|b| b.is_ascii_digit())
            && fraction.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let fraction = fraction.trim_end_matches('0');
    let digits = if fraction.is_empty() {
        let significant = whole.trim_end_matches('0');
        // A zero has no digits either side: any scale holds it.
        if significant.trim_start_matches('0').is_empty() {
            return Some(i64::MIN);
        }
        -((whole.len() - significant.len()) as i64)
    } else {
        fraction.len() as i64
    };
    Some(digits.saturating_sub(exponent))
}
