//! Options crossing from Python: `ConnectOptions` extracted field by field into the
//! core's `ConnectConfig`, and durations given as seconds.

use std::path::PathBuf;
use std::time::Duration;

use jetstream_arrow_core::connection::ConnectConfig;
use jetstream_arrow_core::Error;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::GlueResult;

/// A duration given in seconds as option `option`.
pub fn seconds(value: f64, option: &str) -> Result<Duration, Error> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        Error::bad_input(format!(
            "option '{option}' must be a non-negative number of seconds, got {value}"
        ))
    })
}

/// An optional duration in seconds.
pub fn opt_seconds(value: Option<f64>, option: &str) -> Result<Option<Duration>, Error> {
    value.map(|v| seconds(v, option)).transpose()
}

/// `jetstream_arrow.ConnectOptions`, read by attribute: a field missing on either
/// side is an error at connect time, never a silently ignored option.
#[derive(FromPyObject)]
struct ConnectArgs {
    servers: String,
    user: Option<String>,
    password: Option<String>,
    token: Option<String>,
    creds: Option<PathBuf>,
    nkey_seed: Option<String>,
    tls_ca: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_required: bool,
    tls_first: bool,
    name: Option<String>,
    connect_timeout: f64,
    request_timeout: f64,
    max_reconnects: Option<usize>,
    reconnect_delay: f64,
    retry_on_initial_connect: bool,
    ping_interval: f64,
    domain: Option<String>,
    api_prefix: Option<String>,
    inbox_prefix: Option<String>,
}

/// The field names of [`ConnectArgs`]: Python's `ConnectOptions` must have exactly these.
pub const CONNECT_FIELDS: [&str; 21] = [
    "servers",
    "user",
    "password",
    "token",
    "creds",
    "nkey_seed",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_required",
    "tls_first",
    "name",
    "connect_timeout",
    "request_timeout",
    "max_reconnects",
    "reconnect_delay",
    "retry_on_initial_connect",
    "ping_interval",
    "domain",
    "api_prefix",
    "inbox_prefix",
];

/// Read a `ConnectOptions` into the core's config.
pub fn connect_config(options: &Bound<'_, PyAny>) -> GlueResult<ConnectConfig> {
    let fields: Bound<'_, PyTuple> = options
        .py()
        .import("dataclasses")?
        .call_method1("fields", (options,))?
        .extract()?;
    for field in fields.iter() {
        let name: String = field.getattr("name")?.extract()?;
        if !CONNECT_FIELDS.contains(&name.as_str()) {
            return Err(Error::bad_input(format!(
                "connect option '{name}' is not known to the native core"
            ))
            .into());
        }
    }
    let a: ConnectArgs = options.extract()?;
    Ok(ConnectConfig {
        servers: a.servers,
        user: a.user,
        password: a.password,
        token: a.token,
        creds: a.creds,
        nkey_seed: a.nkey_seed,
        tls_ca: a.tls_ca,
        tls_cert: a.tls_cert,
        tls_key: a.tls_key,
        tls_required: a.tls_required,
        tls_first: a.tls_first,
        name: a.name,
        connect_timeout: seconds(a.connect_timeout, "connect_timeout")?,
        request_timeout: seconds(a.request_timeout, "request_timeout")?,
        max_reconnects: a.max_reconnects,
        reconnect_delay: seconds(a.reconnect_delay, "reconnect_delay")?,
        retry_on_initial_connect: a.retry_on_initial_connect,
        ping_interval: seconds(a.ping_interval, "ping_interval")?,
        domain: a.domain,
        api_prefix: a.api_prefix,
        inbox_prefix: a.inbox_prefix,
    })
}
