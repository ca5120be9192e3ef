//! The core's defaults, limits, error codes, API subjects, name rule, API prefix rule and the redacted form
//! of server URLs, exported as module attributes so Python code and documentation take
//! them from their one home.

use jetstream_arrow_core::api::subjects;
use jetstream_arrow_core::api::validate_name as core_validate_name;
use jetstream_arrow_core::codec;
use jetstream_arrow_core::consume::durable::{ConsumeOptions, FetchOptions};
use jetstream_arrow_core::consume::push::PushOptions;
use jetstream_arrow_core::defaults::{Exported, EXPORTED};
use jetstream_arrow_core::error::err_codes;
use jetstream_arrow_core::options::{Declared, OptionDecl};
use jetstream_arrow_core::publish::input::PublishBatch;
use jetstream_arrow_core::publish::PublishOptions;
use jetstream_arrow_core::read::{FollowOptions, ReadOptions};
use jetstream_arrow_core::{ConnectConfig, Error};
use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3_arrow::PyRecordBatch;

use crate::errors::GlueResult;
use crate::options::table_to_python;

/// Every declared options struct's table, by the name Python knows it by
/// (`_core.OPTION_TABLES`): the facade's dataclasses, Spark's native options, the
/// CLI's flags and the documentation's option tables are checked against or made
/// from these. Each value format's table (the codec's settings) is added after.
const OPTION_TABLES: &[(&str, &[OptionDecl])] = &[
    ("connect", ConnectConfig::TABLE),
    ("publish", PublishOptions::TABLE),
    ("read", ReadOptions::TABLE),
    ("consume", ConsumeOptions::TABLE),
    ("follow", FollowOptions::TABLE),
    ("push", PushOptions::TABLE),
    ("fetch", FetchOptions::TABLE),
];

fn option_tables(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let tables = PyDict::new(py);
    for (name, table) in OPTION_TABLES {
        tables.set_item(name, table_to_python(py, table)?)?;
    }
    for (format, table) in crate::codec::format_tables() {
        tables.set_item(format, table_to_python(py, &table)?)?;
    }
    Ok(tables)
}

/// Check a stream or consumer name; raises `BadInputError` naming `option`, also
/// for a value that is not a string at all.
#[pyfunction]
#[pyo3(signature = (value, option="name"))]
fn validate_name(value: &Bound<'_, PyAny>, option: &str) -> GlueResult<String> {
    let Ok(name) = value.extract::<String>() else {
        return Err(Error::bad_input(format!(
            "option '{option}' must be a non-empty string, got {}",
            value.repr()?
        ))
        .into());
    };
    core_validate_name(&name, option)?;
    Ok(name)
}

/// Checks publish input as a publish would, on `batch`'s columns (an empty batch
/// will do): which columns steer a message and their types, and the constant
/// `subject`. For planners that refuse a write before any row is sent. `names`
/// maps a publish column to the caller's name for it (a column taken under another
/// name): an error of that column names it so, and its `column` attribute too.
#[pyfunction]
#[pyo3(signature = (batch, subject=None, names=None))]
fn check_publish_input(
    batch: PyRecordBatch,
    subject: Option<String>,
    names: Option<HashMap<String, String>>,
) -> GlueResult<()> {
    PublishBatch::new(&batch.into_inner(), subject.as_deref(), usize::MAX).map_err(|err| {
        let theirs = err.column().and_then(|c| names.as_ref()?.get(c)).cloned();
        match theirs {
            Some(name) => err.column_named(&name),
            None => err,
        }
    })?;
    Ok(())
}

/// The JetStream API prefix that `domain` or `api_prefix` select.
#[pyfunction]
#[pyo3(signature = (domain=None, api_prefix=None))]
fn js_api_prefix(domain: Option<String>, api_prefix: Option<String>) -> String {
    jetstream_arrow_core::connection::js_api_prefix(domain.as_deref(), api_prefix.as_deref())
}

/// The subject of a JetStream API request after the prefix: `verb` (one of the
/// `API_*` constants), then the tokens (stream, consumer, ...), dot-separated.
#[pyfunction]
#[pyo3(signature = (verb, *tokens))]
fn api_subject(verb: &str, tokens: Vec<String>) -> String {
    let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
    subjects::subject(verb, &tokens)
}

/// `servers` as messages and `repr`s show it: each URL's user info (a password or a
/// token) replaced by `***`.
#[pyfunction]
fn redact_servers(servers: &str) -> String {
    jetstream_arrow_core::server_urls::redact_servers(servers)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for (name, value) in EXPORTED {
        let name = format!("DEFAULT_{name}");
        match value {
            Exported::Int(n) => m.add(name, n)?,
            Exported::Seconds(d) => m.add(name, d.as_secs_f64())?,
            Exported::Str(s) => m.add(name, s)?,
        }
    }
    for (name, verb) in subjects::EXPORTED {
        m.add(format!("API_{name}"), verb)?;
    }
    for (name, code) in err_codes::EXPORTED {
        m.add(format!("ERR_{name}"), code)?;
    }
    // Limits the facade and the Spark option table check before the engine would.
    m.add("POSITION_SUBJECT_PREFIX", subjects::POSITION_SUBJECT_PREFIX)?;
    m.add("MAX_WINDOW", jetstream_arrow_core::publish::MAX_WINDOW)?;
    m.add("MAX_RETRIES", u32::MAX)?;
    m.add("MAX_SECONDS", jetstream_arrow_core::limits::MAX_SECONDS)?;
    m.add(
        "DIRECT_READ_MAX_MESSAGES",
        jetstream_arrow_core::defaults::DIRECT_READ_MAX_MESSAGES,
    )?;
    m.add("VALUE_COLUMN", codec::VALUE)?;
    m.add("CORRUPT_RECORD_COLUMN", codec::CORRUPT_RECORD)?;
    m.add("CORRUPT_REASON_COLUMN", codec::CORRUPT_REASON)?;
    m.add("MESSAGE_COLUMNS", codec::MESSAGE_COLUMNS.to_vec())?;
    m.add("TTL_COLUMN", jetstream_arrow_core::arrow::schema::TTL)?;
    m.add("VALUE_FORMATS", codec::ValueFormat::NAMES.to_vec())?;
    m.add("ON_MALFORMED_MODES", codec::OnMalformed::NAMES.to_vec())?;
    m.add("AVRO_FRAMINGS", codec::AvroFraming::NAMES.to_vec())?;
    m.add("OPTION_TABLES", option_tables(m.py())?)?;
    m.add_function(wrap_pyfunction!(validate_name, m)?)?;
    m.add_function(wrap_pyfunction!(js_api_prefix, m)?)?;
    m.add_function(wrap_pyfunction!(check_publish_input, m)?)?;
    m.add_function(wrap_pyfunction!(redact_servers, m)?)?;
    m.add_function(wrap_pyfunction!(api_subject, m)?)?;
    m.add_function(wrap_pyfunction!(crate::codec::value_schema, m)?)?;
    m.add_function(wrap_pyfunction!(crate::codec::encode_values, m)?)?;
    m.add_function(wrap_pyfunction!(crate::codec::infer_value_schema, m)?)?;
    m.add_function(wrap_pyfunction!(crate::codec::no_value_reasons, m)?)?;
    m.add_function(wrap_pyfunction!(crate::options::check_connect_options, m)?)?;
    Ok(())
}
