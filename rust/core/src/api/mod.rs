//! Requests to the JetStream API (`<prefix>.STREAM.INFO.X`, ...): JSON in, JSON out,
//! errors as typed `Error`s. Management is not a hot path; this keeps it generic.

use std::time::Duration;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::connection::Connection;
use crate::error::{ApiErrorCode, Error, ErrorKind, Result};

pub mod names;
pub use names::validate_name;

#[derive(Deserialize)]
struct ErrorReply {
    error: Option<ApiErrorCode>,
}

impl Connection {
    /// Request `<api_prefix>.<subject>` and return the raw reply, or the API error.
    pub async fn api_request(
        &self,
        subject: &str,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Bytes> {
        let full = format!("{}.{}", self.api_prefix, subject);
        let timeout = timeout.unwrap_or(self.request_timeout);
        let request = async_nats::Request::new()
            .payload(body)
            .timeout(Some(timeout));
        let reply = self
            .client
            .send_request(full.clone(), request)
            .await
            .map_err(|e| request_error(&full, timeout, e, self))?;
        if let Ok(ErrorReply { error: Some(code) }) = serde_json::from_slice(&reply.payload) {
            return Err(Error::api(&format!("JetStream API {full}"), code));
        }
        Ok(reply.payload)
    }

    /// Like `api_request`, decoding the reply into `T`.
    pub async fn api_json<T: DeserializeOwned>(
        &self,
        subject: &str,
        body: &serde_json::Value,
    ) -> Result<T> {
        let body = if body.is_null() {
            Bytes::new()
        } else {
            Bytes::from(serde_json::to_vec(body).expect("a JSON value serializes"))
        };
        let raw = self.api_request(subject, body, None).await?;
        serde_json::from_slice(&raw).map_err(|e| {
            Error::new(
                ErrorKind::Api,
                format!("JetStream API {subject}: unexpected reply ({e})"),
            )
        })
    }
}

fn request_error(
    subject: &str,
    timeout: Duration,
    err: async_nats::RequestError,
    conn: &Connection,
) -> Error {
    use async_nats::RequestErrorKind as K;
    match err.kind() {
        K::NoResponders => Error::new(
            ErrorKind::JetStreamNotEnabled,
            format!(
                "no JetStream API answers on {subject}: JetStream is not enabled there, or the \
                 'domain' / 'api_prefix' option does not match the server"
            ),
        ),
        K::TimedOut => {
            if let Some(violation) = conn.server_errors.permission_violation_for(subject) {
                Error::new(ErrorKind::Authorization, format!("{subject}: {violation}"))
            } else {
                Error::timeout(format!(
                    "no reply from the JetStream API {subject} within {timeout:?} \
                     (option 'request_timeout')"
                ))
            }
        }
        _ => Error::connection(format!("request to {subject} failed: {err}")),
    }
}
