//! Options crossing from Python, read one way: an options dataclass is read into
//! the core's declared struct ([`jetstream_arrow_core::options::Declared`]) by
//! walking its table, each attribute converted by its declared kind and handed to
//! the struct's setter, which checks it and names the option. A dataclass field the
//! table lacks is refused, so an option is never silently ignored.

use jetstream_arrow_core::options::{Declared, Kind, OptionDecl, OptionValue};
use jetstream_arrow_core::{ConnectConfig, Error};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyString, PyTuple};

use crate::errors::GlueResult;

/// The struct `T` read from the dataclass `options`: every option of its table
/// from the attribute of that name ("connect", "publish", ... name the options in
/// errors).
pub fn read_declared<T: Declared>(options: &Bound<'_, PyAny>, what: &str) -> GlueResult<T> {
    let names: Vec<&str> = T::TABLE.iter().map(|d| d.name).collect();
    check_fields(options, &names, what)?;
    read_table(options)
}

/// The struct `T` read from the attributes of `options` its table names (the caller
/// checked that `options` has no other field).
pub fn read_table<T: Declared>(options: &Bound<'_, PyAny>) -> GlueResult<T> {
    let mut declared = T::default();
    for decl in T::TABLE {
        let value = options.getattr(decl.name)?;
        declared.set(decl.name, option_value(&value, decl)?)?;
    }
    Ok(declared)
}

/// A Python value as the option `decl` takes it, or the error naming the option,
/// what it must be and what it is (only its type for a secret).
fn option_value(value: &Bound<'_, PyAny>, decl: &OptionDecl) -> GlueResult<OptionValue> {
    if value.is_none() {
        return Ok(OptionValue::None);
    }
    let converted = match decl.kind {
        // A bool is an int to Python: True would be read as 1.
        // Integers of other types (numpy's) by their `__index__`, as Python's own
        // `range` takes them.
        Kind::Count if !value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>() => {
            value.extract::<i128>().ok().map(OptionValue::Int)
        }
        Kind::Count if value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>() => {
            match value.extract::<i128>() {
                Ok(n) => Some(OptionValue::Int(n)),
                // Beyond any count the core takes: named as the core names one too large.
                Err(_) => {
                    return Err(Error::bad_input(format!(
                        "option '{}' ({}) out of range: counts and sequences are \
                         non-negative integers",
                        decl.name,
                        value.repr()?
                    ))
                    .into())
                }
            }
        }
        // Any real number (numpy's too, by `__float__`), but not a bool or a string.
        Kind::Seconds | Kind::Number
            if !value.is_instance_of::<PyBool>() && !value.is_instance_of::<PyString>() =>
        {
            value.extract::<f64>().ok().map(OptionValue::Float)
        }
        // True or False, or numpy's `bool_`, which pyo3 reads as one.
        Kind::Bool => value.extract::<bool>().ok().map(OptionValue::Bool),
        Kind::Text | Kind::Choice => value.extract::<String>().ok().map(OptionValue::Text),
        // One string is a list of one.
        Kind::Texts if value.is_instance_of::<PyString>() => {
            Some(OptionValue::Text(value.extract()?))
        }
        Kind::Texts => value
            .try_iter()
            .ok()
            .and_then(|items| {
                items
                    .map(|i| i?.extract::<String>())
                    .collect::<PyResult<_>>()
                    .ok()
            })
            .map(OptionValue::Texts),
        Kind::Path => value.extract().ok().map(OptionValue::Path),
        // The facade's one time parser names the option when the value is no time.
        Kind::Time => {
            let ns: Option<i128> = value
                .py()
                .import("jetstream_arrow._time")?
                .call_method1("to_epoch_ns", (value, decl.name))?
                .extract()?;
            Some(ns.map_or(OptionValue::None, OptionValue::Int))
        }
        Kind::Bytes => value
            .cast::<PyBytes>()
            .ok()
            .map(|b| OptionValue::Bytes(b.as_bytes().to_vec())),
        _ => None,
    };
    converted.ok_or_else(|| wrong_type(value, decl).into())
}

/// The error of a value of the wrong type: the option, what it must be, and what it
/// is (only its type for a secret).
fn wrong_type(value: &Bound<'_, PyAny>, decl: &OptionDecl) -> Error {
    let secret = ["password", "token", "seed", "content"]
        .iter()
        .any(|s| decl.name.contains(s));
    let type_name = || {
        value
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "value".to_string())
    };
    let got = match value.repr() {
        Ok(repr) if !secret => repr.to_string(),
        _ => format!("a value of type {}", type_name()),
    };
    let or_none = if decl.nullable { ", or None" } else { "" };
    Error::bad_option(
        decl.name,
        format!(
            "option '{}' must be {}{or_none}, got {got}",
            decl.name,
            decl.kind.must_be()
        ),
    )
}

/// Refuse a dataclass with a field not `known`: it would be silently ignored (a
/// field missing on the Python side fails the reading by attribute).
pub fn check_fields(options: &Bound<'_, PyAny>, known: &[&str], what: &str) -> GlueResult<()> {
    let fields: Bound<'_, PyTuple> = options
        .py()
        .import("dataclasses")?
        .call_method1("fields", (options,))?
        .extract()?;
    for field in fields.iter() {
        let name: String = field.getattr("name")?.extract()?;
        if !known.contains(&name.as_str()) {
            return Err(Error::bad_input(format!(
                "{what} option '{name}' is not known to the native core"
            ))
            .into());
        }
    }
    Ok(())
}

/// Read a `ConnectOptions` into the core's config, checked by the core.
pub fn connect_config(options: &Bound<'_, PyAny>) -> GlueResult<ConnectConfig> {
    let config: ConnectConfig = read_declared(options, "connect")?;
    config.validate()?;
    Ok(config)
}

/// Checks a `ConnectOptions` as connecting would, without connecting: the core
/// decides what the dataclass takes.
#[pyfunction]
pub fn check_connect_options(options: &Bound<'_, PyAny>) -> GlueResult<()> {
    connect_config(options).map(drop)
}

/// `table` as Python sees it: one dict per option, with exactly the keys `name`,
/// `kind`, `default`, `minimum`, `maximum`, `choices` and `doc`.
pub fn table_to_python<'py>(
    py: Python<'py>,
    table: &[OptionDecl],
) -> PyResult<Bound<'py, PyTuple>> {
    let rows = table
        .iter()
        .map(|decl| {
            let row = PyDict::new(py);
            row.set_item("name", decl.name)?;
            row.set_item("kind", decl.kind.as_str())?;
            row.set_item("default", value_to_python(py, (decl.default)())?)?;
            row.set_item("minimum", limit_to_python(py, (decl.minimum)())?)?;
            row.set_item("maximum", limit_to_python(py, (decl.maximum)())?)?;
            row.set_item("choices", PyTuple::new(py, decl.choices)?)?;
            row.set_item("doc", decl.doc())?;
            Ok(row)
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, rows)
}

fn value_to_python(py: Python<'_>, value: OptionValue) -> PyResult<Bound<'_, PyAny>> {
    Ok(match value {
        OptionValue::None => py.None().into_bound(py),
        OptionValue::Int(n) => n.into_pyobject(py)?.into_any(),
        OptionValue::Float(f) => f.into_pyobject(py)?.into_any(),
        OptionValue::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        OptionValue::Text(s) => PyString::new(py, &s).into_any(),
        OptionValue::Texts(t) => PyTuple::new(py, t)?.into_any(),
        OptionValue::Path(p) => PyString::new(py, &p.to_string_lossy()).into_any(),
        OptionValue::Bytes(b) => PyBytes::new(py, &b).into_any(),
    })
}

fn limit_to_python(
    py: Python<'_>,
    limit: Option<jetstream_arrow_core::options::Limit>,
) -> PyResult<Bound<'_, PyAny>> {
    use jetstream_arrow_core::options::Limit;
    Ok(match limit {
        None => py.None().into_bound(py),
        Some(Limit::Int(n)) => n.into_pyobject(py)?.into_any(),
        Some(Limit::Float(f)) => f.into_pyobject(py)?.into_any(),
    })
}
