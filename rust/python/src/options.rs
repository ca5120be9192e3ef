//! Options crossing from Python: each options dataclass (`ConnectOptions`,
//! `PublishOptions`, `ReadOptions`, `ConsumeOptions`) read by attribute into one struct here, then into the core's
//! struct; values are checked by the core (`option_values`, each struct's
//! `validate`), which names the option.
//!
//! One module: the four dataclasses are read by one macro and one reading of a field
//! of the wrong type; split, each would repeat them.

use std::path::PathBuf;

use jetstream_arrow_core::compression::Compression;
use jetstream_arrow_core::connection::ConnectConfig;
use jetstream_arrow_core::consume::durable::ConsumeOptions;
use jetstream_arrow_core::consume::pull::PullSettings;
use jetstream_arrow_core::defaults;
use jetstream_arrow_core::option_values::{opt_count, opt_seconds, positive_seconds};
use jetstream_arrow_core::publish::input::MessageDefaults;
use jetstream_arrow_core::publish::{OnFull, PublishMode, PublishOptions};
use jetstream_arrow_core::read::{ReadMethod, ReadOptions};
use jetstream_arrow_core::Error;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::errors::GlueResult;

/// Declares the struct an options dataclass is read into by attribute, and `$fields`,
/// the names of its fields, which are the names the dataclass must have (checked
/// before extraction, and compared with the dataclass by the tests): each field is
/// written once.
macro_rules! native_options {
    (
        $(#[$doc:meta])*
        $name:ident, $fields:ident {
            $($(#[$attr:meta])* $field:ident : $ty:ty),* $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(FromPyObject)]
        struct $name {
            $($(#[$attr])* $field: $ty,)*
        }

        /// The fields of the dataclass read into
        #[doc = concat!("[`", stringify!($name), "`].")]
        pub const $fields: &[&str] = &[$(stringify!($field)),*];

        impl $name {
            /// Each field and its Rust type, to say what a field of the wrong type
            /// must be.
            const TYPES: &'static [(&'static str, &'static str)] =
                &[$((stringify!($field), stringify!($ty))),*];

            /// The dataclass `options` read by attribute; a field of the wrong type
            /// is refused naming it, what it must be and what it is.
            fn read(options: &Bound<'_, PyAny>, what: &str) -> GlueResult<Self> {
                options
                    .extract()
                    .map_err(|e| wrong_type(options, &e, what, Self::TYPES).into())
            }
        }
    };
}

/// The error of a dataclass field pyo3 could not read (its own message names the
/// struct here, not the option): the option, what it must be, and what it is
/// (only its type for a secret).
fn wrong_type(
    options: &Bound<'_, PyAny>,
    err: &PyErr,
    what: &str,
    types: &[(&str, &str)],
) -> Error {
    let text = err.to_string();
    // pyo3's derive says "failed to extract field <Struct>.<field>".
    let field = text
        .split("field ")
        .nth(1)
        .and_then(|rest| rest.split('.').nth(1))
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
        });
    let Some((field, ty)) = field.and_then(|f| types.iter().find(|(name, _)| *name == f)) else {
        return Error::bad_input(format!("{what} options: {text}"));
    };
    let optional = ty.starts_with("Option");
    let must_be = if ty.contains("f64") {
        "a number"
    } else if ty.contains("i128") || ty.contains("usize") || ty.contains("u64") {
        "a whole number"
    } else if ty.contains("bool") {
        "True or False"
    } else if ty.contains("Vec") {
        "a list of strings"
    } else if ty.contains("PathBuf") {
        "a path (str or os.PathLike)"
    } else if ty.contains("String") {
        "a string"
    } else {
        ty
    };
    let secret = ["password", "token", "seed", "content"]
        .iter()
        .any(|s| field.contains(s));
    let got = match options.getattr(*field) {
        Ok(value) if secret => format!("a value of type {}", type_name(&value)),
        Ok(value) => value
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_else(|_| format!("a value of type {}", type_name(&value))),
        Err(_) => "nothing".to_string(),
    };
    let or_none = if optional { ", or None" } else { "" };
    Error::bad_input(format!(
        "option '{field}' must be {must_be}{or_none}, got {got}"
    ))
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "value".to_string())
}

/// Refuse a dataclass with a field the struct read from it does not have: a field
/// missing here would be silently ignored (a field missing on the Python side fails
/// the extraction by attribute).
fn check_fields(options: &Bound<'_, PyAny>, known: &[&str], what: &str) -> GlueResult<()> {
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

native_options! {
    /// `jetstream_arrow.ConnectOptions`, read by attribute: a field missing on either
    /// side is an error at connect time, never a silently ignored option.
    ConnectArgs, CONNECT_FIELDS {
        servers: String,
        user: Option<String>,
        password: Option<String>,
        token: Option<String>,
        creds: Option<PathBuf>,
        creds_content: Option<String>,
        nkey_seed: Option<String>,
        tls_ca: Option<PathBuf>,
        tls_cert: Option<PathBuf>,
        tls_key: Option<PathBuf>,
        tls_ca_content: Option<String>,
        tls_cert_content: Option<String>,
        tls_key_content: Option<String>,
        tls_required: bool,
        tls_first: bool,
        name: Option<String>,
        connect_timeout: f64,
        request_timeout: f64,
        max_reconnects: Option<i128>,
        reconnect_delay: f64,
        retry_on_initial_connect: bool,
        ping_interval: f64,
        domain: Option<String>,
        api_prefix: Option<String>,
        inbox_prefix: Option<String>,
        max_decompressed_bytes: Option<i128>,
        decompress: bool,
    }
}

/// Read a `ConnectOptions` into the core's config, checked by the core.
pub fn connect_config(options: &Bound<'_, PyAny>) -> GlueResult<ConnectConfig> {
    check_fields(options, CONNECT_FIELDS, "connect")?;
    // True would otherwise be read as 1 reconnect.
    if options
        .getattr("max_reconnects")?
        .is_instance_of::<pyo3::types::PyBool>()
    {
        return Err(Error::bad_input(
            "option 'max_reconnects' must be a whole number >= 0, or None to reconnect forever",
        )
        .into());
    }
    let a = ConnectArgs::read(options, "connect")?;
    let config = ConnectConfig {
        servers: a.servers,
        user: a.user,
        password: a.password,
        token: a.token,
        creds: a.creds,
        creds_content: a.creds_content,
        nkey_seed: a.nkey_seed,
        tls_ca: a.tls_ca,
        tls_cert: a.tls_cert,
        tls_key: a.tls_key,
        tls_ca_content: a.tls_ca_content,
        tls_cert_content: a.tls_cert_content,
        tls_key_content: a.tls_key_content,
        tls_required: a.tls_required,
        tls_first: a.tls_first,
        name: a.name,
        connect_timeout: positive_seconds(a.connect_timeout, "connect_timeout")?,
        request_timeout: positive_seconds(a.request_timeout, "request_timeout")?,
        max_reconnects: opt_count(a.max_reconnects, "max_reconnects")?,
        reconnect_delay: positive_seconds(a.reconnect_delay, "reconnect_delay")?,
        retry_on_initial_connect: a.retry_on_initial_connect,
        ping_interval: positive_seconds(a.ping_interval, "ping_interval")?,
        domain: a.domain,
        api_prefix: a.api_prefix,
        inbox_prefix: a.inbox_prefix,
        max_decompressed_bytes: opt_count(a.max_decompressed_bytes, "max_decompressed_bytes")?
            .unwrap_or(defaults::MAX_DECOMPRESSED_BYTES),
        decompress: a.decompress,
    };
    config.validate()?;
    Ok(config)
}

/// Checks a `ConnectOptions` as connecting would, without connecting: the core
/// decides what the dataclass takes.
#[pyfunction]
pub fn check_connect_options(options: &Bound<'_, PyAny>) -> GlueResult<()> {
    connect_config(options).map(drop)
}

native_options! {
    /// `jetstream_arrow.PublishOptions`, read by attribute: a field left None takes the
    /// core's default. Counts come as Python ints of any size and are checked by the core.
    PublishArgs, PUBLISH_FIELDS {
        subject: Option<String>,
        window: Option<i128>,
        on_full: Option<String>,
        ack_timeout: Option<f64>,
        max_retries: Option<i128>,
        retry_backoff: Option<f64>,
        msg_id_prefix: Option<String>,
        msg_id_start: Option<i128>,
        expected_stream: Option<String>,
        expected_last_seq: Option<i128>,
        expected_last_msg_id: Option<String>,
        expected_last_subject_seq: Option<i128>,
        mode: Option<String>,
        batch_rows: Option<i128>,
        keep_control_headers: Option<bool>,
        compression: Option<String>,
    }
}

/// Read a `PublishOptions` into the core's options (checked by the core when a
/// publisher is made from them).
pub fn publish_options(options: &Bound<'_, PyAny>) -> GlueResult<PublishOptions> {
    check_fields(options, PUBLISH_FIELDS, "publish")?;
    let a = PublishArgs::read(options, "publish")?;
    let defaults = PublishOptions::default();
    let options = PublishOptions {
        window: opt_count(a.window, "window")?.unwrap_or(defaults.window),
        fail_when_full: match a.on_full.as_deref() {
            None => defaults.fail_when_full,
            Some(on_full) => OnFull::parse(on_full)? == OnFull::Fail,
        },
        ack_timeout: opt_seconds(a.ack_timeout, "ack_timeout")?.unwrap_or(defaults.ack_timeout),
        max_retries: opt_count(a.max_retries, "max_retries")?.unwrap_or(defaults.max_retries),
        retry_backoff: opt_seconds(a.retry_backoff, "retry_backoff")?
            .unwrap_or(defaults.retry_backoff),
        defaults: MessageDefaults {
            subject: a.subject,
            msg_id_prefix: a.msg_id_prefix,
            expected_stream: a.expected_stream,
            keep_control_headers: a.keep_control_headers,
            compression: a
                .compression
                .as_deref()
                .map(Compression::parse)
                .transpose()?,
        },
        msg_id_start: opt_count(a.msg_id_start, "msg_id_start")?.unwrap_or(defaults.msg_id_start),
        expected_last_seq: opt_count(a.expected_last_seq, "expected_last_seq")?,
        expected_last_msg_id: a.expected_last_msg_id,
        expected_last_subject_seq: opt_count(
            a.expected_last_subject_seq,
            "expected_last_subject_seq",
        )?,
        mode: match a.mode.as_deref() {
            None => defaults.mode,
            Some(mode) => PublishMode::parse(mode)?,
        },
        batch_rows: opt_count(a.batch_rows, "batch_rows")?.unwrap_or(defaults.batch_rows),
        values: None,
    };
    Ok(options)
}

/// What each field of `PublishOptions` left None means: the core's defaults, by field.
pub fn publish_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PublishOptions::default();
    let out = PyDict::new(py);
    for &field in PUBLISH_FIELDS {
        out.set_item(field, py.None())?;
    }
    out.set_item("window", d.window)?;
    out.set_item("on_full", if d.fail_when_full { "fail" } else { "wait" })?;
    out.set_item("ack_timeout", d.ack_timeout.as_secs_f64())?;
    out.set_item("max_retries", d.max_retries)?;
    out.set_item("retry_backoff", d.retry_backoff.as_secs_f64())?;
    out.set_item("msg_id_start", d.msg_id_start)?;
    out.set_item("mode", d.mode.as_str())?;
    out.set_item("batch_rows", d.batch_rows)?;
    Ok(out)
}

native_options! {
    /// `jetstream_arrow.ReadOptions`, read by attribute: a field left None takes the core's
    /// default. Subjects and times are read from the dataclass's normalising properties
    /// (`subject_filters`, `start_time_ns`, `end_time_ns`), which accept what a Python user
    /// gives (one subject or several; a datetime, ISO text or epoch seconds).
    ReadArgs, READ_FIELDS {
        start_seq: Option<i128>,
        end_seq: Option<i128>,
        #[pyo3(attribute("subject_filters"))]
        subjects: Vec<String>,
        #[pyo3(attribute("start_time_ns"))]
        start_time: Option<i64>,
        #[pyo3(attribute("end_time_ns"))]
        end_time: Option<i64>,
        include_headers: Option<bool>,
        payload_views: Option<bool>,
        include_ttl: Option<bool>,
        include_positions: Option<bool>,
        batch_rows: Option<i128>,
        max_bytes: Option<i128>,
        heartbeat: Option<f64>,
        resume_timeout: Option<f64>,
        method: Option<String>,
        last_per_subject: Option<bool>,
        as_of_seq: Option<i128>,
        #[pyo3(attribute("as_of_time_ns"))]
        as_of_time: Option<i64>,
    }
}

/// Read a `ReadOptions` into the core's options (checked by the core when the read
/// opens).
pub fn read_options(options: &Bound<'_, PyAny>) -> GlueResult<ReadOptions> {
    check_fields(options, READ_FIELDS, "read")?;
    let a = ReadArgs::read(options, "read")?;
    let d = ReadOptions::default();
    Ok(ReadOptions {
        start_seq: opt_count(a.start_seq, "start_seq")?,
        end_seq: opt_count(a.end_seq, "end_seq")?,
        subjects: a.subjects,
        start_time_ns: a.start_time,
        end_time_ns: a.end_time,
        include_headers: a.include_headers.unwrap_or(d.include_headers),
        payload_views: a.payload_views.unwrap_or(d.payload_views),
        include_ttl: a.include_ttl.unwrap_or(d.include_ttl),
        include_positions: a.include_positions.unwrap_or(d.include_positions),
        batch_rows: opt_count(a.batch_rows, "batch_rows")?.unwrap_or(d.batch_rows),
        max_bytes: opt_count(a.max_bytes, "max_bytes")?.unwrap_or(d.max_bytes),
        heartbeat: opt_seconds(a.heartbeat, "heartbeat")?.unwrap_or(d.heartbeat),
        resume_timeout: opt_seconds(a.resume_timeout, "resume_timeout")?
            .unwrap_or(d.resume_timeout),
        method: match a.method.as_deref() {
            None => d.method,
            Some(method) => ReadMethod::parse(method)?,
        },
        values: None,
        last_per_subject: a.last_per_subject.unwrap_or(d.last_per_subject),
        as_of_seq: opt_count(a.as_of_seq, "as_of_seq")?,
        as_of_time_ns: a.as_of_time,
    })
}

/// What each field of `ReadOptions` left None means: the core's defaults, by field.
pub fn read_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = ReadOptions::default();
    let out = PyDict::new(py);
    for &field in READ_FIELDS {
        out.set_item(field, py.None())?;
    }
    out.set_item("include_headers", d.include_headers)?;
    out.set_item("payload_views", d.payload_views)?;
    out.set_item("include_ttl", d.include_ttl)?;
    out.set_item("include_positions", d.include_positions)?;
    out.set_item("batch_rows", d.batch_rows)?;
    out.set_item("max_bytes", d.max_bytes)?;
    out.set_item("heartbeat", d.heartbeat.as_secs_f64())?;
    out.set_item("resume_timeout", d.resume_timeout.as_secs_f64())?;
    out.set_item("method", defaults::READ_METHOD)?;
    out.set_item("last_per_subject", d.last_per_subject)?;
    Ok(out)
}

native_options! {
    /// `jetstream_arrow.ConsumeOptions` (continuous consumption of a pull consumer), read
    /// by attribute: a field left None takes the core's default.
    ConsumeArgs, CONSUME_FIELDS {
        max_messages: Option<i128>,
        max_bytes: Option<i128>,
        threshold_messages: Option<i128>,
        threshold_bytes: Option<i128>,
        expires: Option<f64>,
        heartbeat: Option<f64>,
        batch_rows: Option<i128>,
        batch_wait: Option<f64>,
        include_headers: Option<bool>,
    }
}

/// Read a `ConsumeOptions` into the core's options (checked by the core when
/// consumption starts). Thresholds default to half the buffer, as in nats.go.
pub fn consume_options(options: &Bound<'_, PyAny>) -> GlueResult<ConsumeOptions> {
    check_fields(options, CONSUME_FIELDS, "consume")?;
    let a = ConsumeArgs::read(options, "consume")?;
    let d = ConsumeOptions::default();
    let mut pull = PullSettings::new(
        opt_count(a.max_messages, "max_messages")?.unwrap_or(d.pull.max_messages),
        opt_count(a.max_bytes, "max_bytes")?,
        opt_seconds(a.expires, "expires")?.unwrap_or(d.pull.expires),
        Some(opt_seconds(a.heartbeat, "heartbeat")?.unwrap_or(defaults::HEARTBEAT)),
    );
    if let Some(t) = opt_count(a.threshold_messages, "threshold_messages")? {
        pull.threshold_messages = t;
    }
    if let Some(t) = opt_count(a.threshold_bytes, "threshold_bytes")? {
        pull.threshold_bytes = Some(t);
    }
    Ok(ConsumeOptions {
        pull,
        batch_rows: opt_count(a.batch_rows, "batch_rows")?.unwrap_or(d.batch_rows),
        batch_wait: opt_seconds(a.batch_wait, "batch_wait")?.unwrap_or(d.batch_wait),
        include_headers: a.include_headers.unwrap_or(d.include_headers),
        values: None,
    })
}

/// What each field of `ConsumeOptions` left None means: the core's defaults, by field
/// (None where the default depends on other fields: thresholds are half the buffer).
pub fn consume_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = ConsumeOptions::default();
    let out = PyDict::new(py);
    for &field in CONSUME_FIELDS {
        out.set_item(field, py.None())?;
    }
    out.set_item("max_messages", d.pull.max_messages)?;
    out.set_item("expires", d.pull.expires.as_secs_f64())?;
    out.set_item("heartbeat", d.pull.heartbeat.map(|h| h.as_secs_f64()))?;
    out.set_item("batch_rows", d.batch_rows)?;
    out.set_item("batch_wait", d.batch_wait.as_secs_f64())?;
    out.set_item("include_headers", d.include_headers)?;
    Ok(out)
}
