//! The JetStream vocabulary: API subjects ([`subjects`]), request and reply bodies
//! ([`types`]), status messages ([`status`]), the name rule ([`names`]), and requests
//! to the API (`<prefix>.STREAM.INFO.X`, ...): JSON in, JSON out, errors as typed
//! `Error`s.

use std::time::Duration;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::connection::Connection;
use crate::error::{ApiErrorCode, Error, ErrorKind, Result};
use crate::retry::{retry_transient, Backoff};

pub mod headers;
pub mod names;
pub mod status;
pub mod subject_match;
pub mod subjects;
pub mod types;

pub use names::validate_name;
pub use status::Status;

#[derive(Deserialize)]
struct ErrorReply {
    error: Option<ApiErrorCode>,
}

impl Connection {
    /// The full subject of an API request: `<api_prefix>.<subject>`.
    pub fn api_subject(&self, subject: &str) -> String {
        format!("{}.{subject}", self.api_prefix)
    }

    /// Request `<api_prefix>.<subject>` and return the raw reply, or the API error.
    pub async fn api_request(
        &self,
        subject: &str,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Bytes> {
        let full = self.api_subject(subject);
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

    /// [`Self::api_request`], asked again while the answer is what a server
    /// restarting or a stream electing its leader gives, for up to `within` (none:
    /// asked once).
    pub async fn api_request_patiently(
        &self,
        subject: &str,
        body: Bytes,
        timeout: Option<Duration>,
        within: Option<Duration>,
    ) -> Result<Bytes> {
        match within {
            None => self.api_request(subject, body, timeout).await,
            Some(within) => {
                retry_transient(within, Backoff::API, || {
                    self.api_request(subject, body.clone(), timeout)
                })
                .await
            }
        }
    }

    /// Request `subject` with `body` as JSON, decoding the reply into `T`.
    pub async fn api_json<B: Serialize, T: DeserializeOwned>(
        &self,
        subject: &str,
        body: &B,
    ) -> Result<T> {
        let body = Bytes::from(serde_json::to_vec(body).expect("a request body serializes"));
        decode(subject, self.api_request(subject, body, None).await?)
    }

    /// Request `subject` with an empty body, decoding the reply into `T`.
    pub async fn api_get<T: DeserializeOwned>(&self, subject: &str) -> Result<T> {
        decode(
            subject,
            self.api_request(subject, Bytes::new(), None).await?,
        )
    }

    /// [`Self::api_get`], asked again while the answer is what a server restarting or
    /// a stream electing its leader gives (no reply, a lost connection, a `503`),
    /// for up to `within`; then the last error.
    pub async fn api_get_patiently<T: DeserializeOwned>(
        &self,
        subject: &str,
        within: Duration,
    ) -> Result<T> {
        retry_transient(within, Backoff::API, || self.api_get(subject)).await
    }
}

fn decode<T: DeserializeOwned>(subject: &str, raw: Bytes) -> Result<T> {
    serde_json::from_slice(&raw).map_err(|e| {
        Error::new(
            ErrorKind::Api,
            format!("JetStream API {subject}: unexpected reply ({e})"),
        )
    })
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
            } else if let Some(why) = conn.inbox_refused() {
                Error::new(
                    ErrorKind::Authorization,
                    format!("no reply from the JetStream API {subject}: {why}"),
                )
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
