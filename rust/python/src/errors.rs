//! Core errors become the exceptions of `jetstream_arrow.exceptions` (defined in
//! Python so builtins can be extra bases); one class per `ErrorKind`.
//!
//! Every function of the glue returns [`PyResult`] over [`GlueError`]-convertible
//! errors, so `?` works on core errors and Python errors alike and each core error
//! reaches Python as its own class.

use jetstream_arrow_core::retry::is_transient;
use jetstream_arrow_core::{Error, ErrorKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// An error on its way to Python: a core error (with the value an interrupted
/// publish attaches, if any) or an exception already raised by Python.
pub enum GlueError {
    Core(Error, Option<Py<PyAny>>),
    Python(PyErr),
}

impl GlueError {
    /// A core error carrying `result` (what was done before it happened).
    pub fn with_result(err: Error, result: Py<PyAny>) -> Self {
        Self::Core(err, Some(result))
    }
}

impl From<Error> for GlueError {
    fn from(err: Error) -> Self {
        Self::Core(err, None)
    }
}

impl From<PyErr> for GlueError {
    fn from(err: PyErr) -> Self {
        Self::Python(err)
    }
}

impl From<pyo3::CastError<'_, '_>> for GlueError {
    fn from(err: pyo3::CastError<'_, '_>) -> Self {
        Self::Python(err.into())
    }
}

impl From<GlueError> for PyErr {
    fn from(err: GlueError) -> Self {
        match err {
            GlueError::Python(e) => e,
            GlueError::Core(e, result) => core_to_py(e, result),
        }
    }
}

/// The result type of glue functions: `?` converts core errors and Python errors.
pub type GlueResult<T> = Result<T, GlueError>;

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
        ErrorKind::MalformedPayload => "MalformedPayloadError",
        ErrorKind::NewField => "NewFieldError",
        ErrorKind::NothingToInfer => "NothingToInferError",
    }
}

fn core_to_py(err: Error, result: Option<Py<PyAny>>) -> PyErr {
    Python::attach(|py| {
        let build = || -> PyResult<PyErr> {
            let module = py.import("jetstream_arrow.exceptions")?;
            let class = module.getattr(class_name(err.kind()))?;
            let exc = match err.api_code() {
                Some(code) => class.call1((
                    err.message(),
                    code.code,
                    code.err_code,
                    code.description.as_str(),
                ))?,
                None => class.call1((err.message(),))?,
            };
            // What an interrupted publish had done, whatever stopped it: a lost
            // connection reports its acknowledged rows as much as bad input does.
            if let Some(result) = result {
                exc.setattr("result", result)?;
            }
            // Where the payload with a new field is, for a caller that reads on from it.
            if let Some(at) = err.new_field_at() {
                exc.setattr("seq", at.seq)?;
                exc.setattr("field", at.field.as_str())?;
            }
            // The options and the column at fault, by name: callers that name them
            // otherwise (Spark's options, the command line's flags, a DataFrame's
            // columns) tell them by these, never by the message's words.
            if !err.options().is_empty() {
                let options = PyTuple::new(py, err.options())?;
                exc.setattr("options", options)?;
            }
            if let Some(column) = err.column() {
                exc.setattr("column", column)?;
            }
            // The core's one rule for what a retry may cure, so callers that retry
            // (Spark's planning) do not restate it.
            exc.setattr("transient", is_transient(&err))?;
            Ok(PyErr::from_value(exc))
        };
        build().unwrap_or_else(|e| {
            PyRuntimeError::new_err(format!("{err} (and raising it failed: {e})"))
        })
    })
}
