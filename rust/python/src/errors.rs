//! Core errors become the exceptions of `jetstream_arrow.exceptions` (defined in
//! Python so builtins can be extra bases); one class per `ErrorKind`.

use jetstream_arrow_core::{Error, ErrorKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Connection => "ConnectionFailedError",
        ErrorKind::Authorization => "AuthorizationError",
        ErrorKind::Timeout => "OperationTimeoutError",
        ErrorKind::MissedHeartbeats => "MissedHeartbeatsError",
        ErrorKind::Api => "ApiError",
        ErrorKind::NotFound => "NotFoundError",
        ErrorKind::JetStreamNotEnabled => "JetStreamNotEnabledError",
        ErrorKind::ConsumerDeleted => "ConsumerDeletedError",
        ErrorKind::BadInput => "BadInputError",
        _ => "JetStreamArrowError",
    }
}

/// The Python exception for `err`; `result` is attached to errors that carry one.
pub fn to_py_err(err: Error, result: Option<Py<PyAny>>) -> PyErr {
    Python::attach(|py| {
        let build = || -> PyResult<PyErr> {
            let module = py.import("jetstream_arrow.exceptions")?;
            let class = module.getattr(class_name(err.kind()))?;
            let exc = match (err.api_code(), err.kind()) {
                (Some(code), _) => class.call1((
                    err.message(),
                    code.code,
                    code.err_code,
                    code.description.as_str(),
                ))?,
                (
                    None,
                    ErrorKind::Api
                    | ErrorKind::NotFound
                    | ErrorKind::JetStreamNotEnabled
                    | ErrorKind::ConsumerDeleted,
                ) => class.call1((err.message(),))?,
                (None, ErrorKind::BadInput) => class.call1((err.message(), result))?,
                (None, _) => class.call1((err.message(),))?,
            };
            Ok(PyErr::from_value(exc))
        };
        build().unwrap_or_else(|e| {
            PyRuntimeError::new_err(format!("{err} (and raising it failed: {e})"))
        })
    })
}

/// `?`-friendly conversion for results without an attached value.
pub trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    fn py(self) -> PyResult<T> {
        self.map_err(|e| to_py_err(e, None))
    }
}
