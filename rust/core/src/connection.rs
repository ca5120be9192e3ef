//! Connecting to NATS: options in, a connected client with its JetStream API prefix out.
//!
//! One module: the options, how they become async-nats options, and the connection
//! they make are one concept (the credentials in URLs are `server_urls.rs`, the TLS
//! material `tls.rs`).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::{Client, ConnectOptions, Event, ServerError};
use bytes::Bytes;

use crate::compression::Decompression;
use crate::defaults;
use crate::error::{Error, ErrorKind, Result};
use crate::limits::MIN_SECONDS;
use crate::server_urls::{redact_servers, redact_url, url_credentials, UrlCredentials};
use crate::tls::{TlsMaterial, TlsOptions};

crate::declare_options! {
    /// Everything needed to reach NATS and its JetStream API: every field is an option
    /// callers give by name (Python's `ConnectOptions`); durations are `Duration`s here.
    #[derive(Debug, Clone)]
    pub struct ConnectConfig () {
        /// One URL or a comma-separated list.
        servers: String = defaults::SERVERS;
        /// The user of user/password authentication.
        user: Option<String>;
        /// The password of user/password authentication (secret).
        password: Option<String>;
        /// A token to authenticate with (secret).
        token: Option<String>;
        /// A `.creds` file: a user JWT and its NKey seed.
        creds: Option<PathBuf>;
        /// The text of a `.creds` file (secret), where no file can be laid out.
        creds_content: Option<String>;
        /// An NKey seed to authenticate with (secret).
        nkey_seed: Option<String>;
        /// The CA certificates (PEM file) the server's certificate is checked against.
        tls_ca: Option<PathBuf>;
        /// The client's certificate (PEM file), with tls_key.
        tls_cert: Option<PathBuf>;
        /// The client certificate's key (PEM file).
        tls_key: Option<PathBuf>;
        /// tls_ca as PEM text.
        tls_ca_content: Option<String>;
        /// tls_cert as PEM text.
        tls_cert_content: Option<String>;
        /// tls_key as PEM text (secret).
        tls_key_content: Option<String>;
        /// Refuse a server that does not offer TLS.
        tls_required: bool = false;
        /// TLS before the server's INFO (servers configured with handshake_first).
        tls_first: bool = false;
        /// The connection's name, as the server shows it.
        name: Option<String> = defaults::CLIENT_NAME;
        /// How long connecting to a server may take.
        connect_timeout: Duration = defaults::CONNECT_TIMEOUT, min MIN_SECONDS;
        /// How long an API request waits for its reply.
        request_timeout: Duration = defaults::REQUEST_TIMEOUT, min MIN_SECONDS;
        /// Reconnect attempts at most (None: reconnect forever).
        max_reconnects: Option<usize> = defaults::MAX_RECONNECTS;
        /// The pause between reconnect attempts.
        reconnect_delay: Duration = defaults::RECONNECT_DELAY, min MIN_SECONDS;
        /// Keep trying when the first connect fails (reconnect rules apply).
        retry_on_initial_connect: bool = false;
        /// How often the client pings the server.
        ping_interval: Duration = defaults::PING_INTERVAL, min MIN_SECONDS;
        /// The JetStream domain: API prefix `$JS.<domain>.API`.
        domain: Option<String>;
        /// The JetStream API prefix (instead of domain).
        api_prefix: Option<String>;
        /// The prefix of the client's reply subjects (default `_INBOX`).
        inbox_prefix: Option<String>;
        /// The most bytes a compressed payload may decompress to on a read.
        max_decompressed_bytes: usize = defaults::MAX_DECOMPRESSED_BYTES, min 1;
        /// Reads decompress payloads marked Content-Encoding (else hand them out as stored).
        decompress: bool = true;
    }
}

/// The JetStream API prefix: `api_prefix`, or `$JS.<domain>.API`, or `$JS.API`.
pub fn js_api_prefix(domain: Option<&str>, api_prefix: Option<&str>) -> String {
    match (api_prefix, domain) {
        (Some(prefix), _) if !prefix.is_empty() => prefix.trim_end_matches('.').to_string(),
        (_, Some(domain)) if !domain.is_empty() => format!("$JS.{domain}.API"),
        _ => "$JS.API".to_string(),
    }
}

impl ConnectConfig {
    pub fn js_api_prefix(&self) -> String {
        js_api_prefix(self.domain.as_deref(), self.api_prefix.as_deref())
    }

    /// What can be said of these options without a server or a file, naming the
    /// options: the ones that exclude each other or go together, and the durations.
    /// [`Connection::connect`] checks it first; Python's `ConnectOptions` when made.
    pub fn validate(&self) -> Result<()> {
        let given = |o: &Option<String>| o.as_deref().is_some_and(|s| !s.is_empty());
        if self.max_decompressed_bytes == 0 {
            return Err(Error::bad_option(
                "max_decompressed_bytes",
                "option 'max_decompressed_bytes' must be at least 1 (bytes a compressed \
                 payload may decompress to)",
            ));
        }
        if given(&self.domain) && given(&self.api_prefix) {
            return Err(Error::bad_options(
                &["domain", "api_prefix"],
                "options 'domain' and 'api_prefix' exclude each other: a domain D means \
                 api_prefix '$JS.D.API'; give one of them",
            ));
        }
        crate::tls::one_of(
            ("creds", &self.creds),
            ("creds_content", &self.creds_content),
        )?;
        self.tls_options().check()?;
        match (&self.user, &self.password) {
            (Some(_), None) => {
                return Err(Error::bad_options(
                    &["user", "password"],
                    "option 'user' needs 'password'",
                ))
            }
            // A password alone is sent nowhere: the server takes it only with a user.
            (None, Some(_)) => {
                return Err(Error::bad_options(
                    &["password", "user"],
                    "option 'password' needs 'user'",
                ))
            }
            _ => {}
        }
        for (option, duration) in [
            ("connect_timeout", self.connect_timeout),
            ("request_timeout", self.request_timeout),
            ("reconnect_delay", self.reconnect_delay),
            ("ping_interval", self.ping_interval),
        ] {
            if duration.is_zero() {
                return Err(Error::bad_option(
                    option,
                    format!("option '{option}' must be a positive number of seconds, got 0"),
                ));
            }
        }
        Ok(())
    }

    fn tls_options(&self) -> TlsOptions<'_> {
        TlsOptions {
            ca: &self.tls_ca,
            cert: &self.tls_cert,
            key: &self.tls_key,
            ca_content: &self.tls_ca_content,
            cert_content: &self.tls_cert_content,
            key_content: &self.tls_key_content,
        }
    }
}

/// Server errors reported asynchronously (`-ERR` lines such as permission
/// violations). A publish that sees no ack looks here to say why.
#[derive(Debug, Default)]
pub struct ServerErrors {
    recent: Mutex<VecDeque<String>>,
}

impl ServerErrors {
    const KEEP: usize = 32;

    fn push(&self, message: String) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() == Self::KEEP {
            recent.pop_front();
        }
        recent.push_back(message);
    }

    /// The newest permission violation that mentions `subject`, if any.
    pub fn permission_violation_for(&self, subject: &str) -> Option<String> {
        self.newest("permissions violation", subject)
    }

    /// The newest refused subscription under `inbox_prefix`, if any.
    pub fn subscription_violation_under(&self, inbox_prefix: &str) -> Option<String> {
        self.newest(
            "permissions violation for subscription",
            &format!("{inbox_prefix}."),
        )
    }

    fn newest(&self, what: &str, mentioning: &str) -> Option<String> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent
            .iter()
            .rev()
            .find(|m| m.to_ascii_lowercase().contains(what) && m.contains(mentioning))
            .cloned()
    }
}

/// A live connection with the JetStream API prefix it talks to.
#[derive(Clone, Debug)]
pub struct Connection {
    pub client: Client,
    pub api_prefix: String,
    pub request_timeout: Duration,
    pub server_errors: Arc<ServerErrors>,
    /// Whether every read of this connection decompresses a payload marked
    /// compressed (`decompress`), into at most how many bytes
    /// (`max_decompressed_bytes`).
    pub decompression: Decompression,
}

impl Connection {
    /// Whether the client is connected now (not reconnecting, not closed).
    pub fn is_connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    pub async fn connect(config: &ConnectConfig) -> Result<Self> {
        config.validate()?;
        let server_errors = Arc::new(ServerErrors::default());
        let servers: Vec<async_nats::ServerAddr> = config
            .servers
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse().map_err(|e| {
                    let s = redact_url(s);
                    Error::bad_option(
                        "servers",
                        format!("option 'servers': cannot parse {s:?}: {e}"),
                    )
                })
            })
            .collect::<Result<_>>()?;
        if servers.is_empty() {
            return Err(Error::bad_option(
                "servers",
                "option 'servers' is empty: give a URL such as nats://127.0.0.1:4222",
            ));
        }
        let mut options = build_options(config, server_errors.clone()).await?;
        match url_credentials(&servers)? {
            Some(_) if config.user.is_some() || config.token.is_some() => {
                return Err(Error::bad_input(
                    "credentials given twice: in a URL of option 'servers' and in option \
                     'user' or 'token'; give them once",
                ))
            }
            Some(UrlCredentials::UserPassword(user, password)) => {
                options = options.user_and_password(user, password)
            }
            Some(UrlCredentials::Token(token)) => options = options.token(token),
            None => {}
        }
        // Messages below name the servers; a URL may carry a password or a token.
        let shown = redact_servers(&config.servers);
        // connect() has its own connection timeout, but with several servers and
        // TLS it can take longer; the outer bound keeps the promise that nothing hangs.
        let outer = config.connect_timeout * (servers.len() as u32 + 1);
        let client = tokio::time::timeout(outer, options.connect(servers.as_slice()))
            .await
            .map_err(|_| {
                Error::timeout(format!(
                    "connecting to {shown} took longer than {outer:?} (option 'connect_timeout')"
                ))
            })?
            .map_err(|e| Error::from(e).context(format!("cannot connect to {shown}")))?;
        Ok(Self {
            client,
            api_prefix: config.js_api_prefix(),
            request_timeout: config.request_timeout,
            server_errors,
            decompression: Decompression {
                enabled: config.decompress,
                max_payload: config.max_decompressed_bytes,
            },
        })
    }

    /// Send what is buffered and wait for the server's answer, at most `timeout`
    /// (default: the request timeout).
    ///
    /// The client's own flush only writes its buffer to the socket, which succeeds
    /// while the server is paused; a request to a subject nobody answers is a round
    /// trip through the server, answered at once with `503 No Responders` (or, for
    /// a user not allowed to publish there, with a permissions error: an answer too).
    pub async fn flush(&self, timeout: Option<Duration>) -> Result<()> {
        let timeout = timeout.unwrap_or(self.request_timeout);
        let silent = || {
            Error::timeout(format!(
                "flush: no answer from the server within {timeout:?}; it may be paused or \
                 unreachable"
            ))
        };
        let round_trip = async {
            self.client
                .flush()
                .await
                .map_err(|e| Error::connection(format!("flush failed: {e}")))?;
            let probe = self.client.new_inbox();
            match self.client.request(probe.clone(), Bytes::new()).await {
                Ok(_) => Ok(()),
                Err(e) => match e.kind() {
                    async_nats::client::RequestErrorKind::NoResponders => Ok(()),
                    async_nats::client::RequestErrorKind::TimedOut
                        if self
                            .server_errors
                            .permission_violation_for(&probe)
                            .is_some()
                            || self.inbox_refused().is_some() =>
                    {
                        // The server answered (with an error), or no answer can
                        // reach this client at all: either way it is not silent.
                        Ok(())
                    }
                    async_nats::client::RequestErrorKind::TimedOut => Err(silent()),
                    _ => Err(Error::connection(format!("flush failed: {e}"))),
                },
            }
        };
        match tokio::time::timeout(timeout, round_trip).await {
            Ok(answered) => answered,
            Err(_) => Err(silent()),
        }
    }

    /// Deliver what is buffered, then close. A dead server cannot make this hang:
    /// each step waits at most the request timeout.
    pub async fn close(&self) {
        // Writing out the buffer is all closing needs; waiting for the server's
        // answer (`flush`) would make a paused server hold up every close.
        let _ = tokio::time::timeout(self.request_timeout, self.client.flush()).await;
        let _ = tokio::time::timeout(self.request_timeout, self.client.drain()).await;
    }

    /// Why no reply can reach this connection, when the server refused the
    /// subscription to its reply inboxes (a user allowed to subscribe only under some
    /// prefix, and no matching option 'inbox_prefix'): said instead of a bare timeout.
    pub fn inbox_refused(&self) -> Option<String> {
        let inbox = self.client.new_inbox();
        let prefix = inbox.rsplit_once('.').map_or(inbox.as_str(), |(p, _)| p);
        self.server_errors
            .subscription_violation_under(prefix)
            .map(|violation| {
                format!(
                    "the server refused the subscription to this connection's reply inbox \
                     ({violation}); set option 'inbox_prefix' to a prefix this user may \
                     subscribe to"
                )
            })
    }

    /// The largest payload (headers included) the server accepts.
    pub fn max_payload(&self) -> usize {
        self.client.server_info().max_payload
    }
}

async fn build_options(
    config: &ConnectConfig,
    errors: Arc<ServerErrors>,
) -> Result<ConnectOptions> {
    let mut options = match (&config.creds, &config.creds_content) {
        (Some(path), _) => ConnectOptions::with_credentials_file(path.clone())
            .await
            .map_err(|e| {
                Error::new(
                    ErrorKind::BadInput,
                    format!("option 'creds': cannot read {}: {e}", path.display()),
                )
            })?,
        // The parser's error could quote the text: it is not passed on.
        (None, Some(text)) => ConnectOptions::with_credentials(text).map_err(|_| {
            Error::bad_input(
                "option 'creds_content': not the content of a .creds file (a user JWT and \
                 an nkey seed, each between its BEGIN and END lines)",
            )
        })?,
        (None, None) => ConnectOptions::new(),
    };
    if let Some(user) = &config.user {
        options =
            options.user_and_password(user.clone(), config.password.clone().unwrap_or_default());
    }
    if let Some(token) = &config.token {
        options = options.token(token.clone());
    }
    if let Some(seed) = &config.nkey_seed {
        options = options.nkey(seed.clone());
    }
    let tls = TlsMaterial::of(config.tls_options())?;
    if tls.has_content() {
        options = options.tls_client_config(tls.client_config()?);
    } else {
        if let Some(ca) = &config.tls_ca {
            options = options.add_root_certificates(ca.clone());
        }
        if let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
    }
    // A CA or a client certificate asks for TLS, as in nats.go.
    if config.tls_required || tls.asks_for_tls() {
        options = options.require_tls(true);
    }
    if config.tls_first {
        options = options.tls_first();
    }
    if let Some(name) = &config.name {
        options = options.name(name);
    }
    if let Some(prefix) = &config.inbox_prefix {
        options = options.custom_inbox_prefix(prefix);
    }
    if config.retry_on_initial_connect {
        options = options.retry_on_initial_connect();
    }
    let delay = config.reconnect_delay;
    options = options
        .connection_timeout(config.connect_timeout)
        .request_timeout(Some(config.request_timeout))
        .ping_interval(config.ping_interval)
        // async-nats reads 0 as "forever" and counts the first try after a loss as
        // an attempt: 0 (no reconnecting) is one immediate try, then giving up.
        .max_reconnects(config.max_reconnects.map(|n| n.max(1)))
        // The pull loop keeps up to MAX_BUFFERED_MESSAGES requested and the publish
        // window up to MAX_WINDOW acks in flight; the subscription buffer must hold
        // them all, or the client drops messages while Python is busy. (The channel
        // allocates as it fills, so a large bound costs nothing up front.)
        .subscription_capacity(crate::limits::SUBSCRIPTION_CAPACITY)
        .reconnect_delay_callback(move |attempt| {
            delay.min(Duration::from_millis(100) * attempt as u32)
        })
        // Rows are validated by the publisher with messages that name the row;
        // checking again per message in the client is wasted work.
        .skip_subject_validation(true)
        .event_callback(move |event| {
            let errors = errors.clone();
            crate::events::connection_event(&event);
            async move {
                if let Event::ServerError(ServerError::Other(message)) = event {
                    errors.push(message);
                }
            }
        });
    Ok(options)
}
