//! The limit: a near-free async-nats client that publishes to and fetches from a JetStream
//! stream, doing as little as it can per message, so the benches can say how close the
//! package gets to what the server itself can take and give.
//!
//! ```text
//! native-baseline publish --url U --stream S --subject X --count N --size B [--window W]
//! native-baseline fetch   --url U --stream S --count N [--batch K] [--max-bytes M]
//! native-baseline flow    --url U --stream S --count N [--max-ack-pending P]
//! native-baseline raw-fetch --url U --stream S --count N [--batch K] [--max-bytes M]
//! native-baseline raw-publish-fast --url U --subject X --count N --size B [--window W]
//! ```
//!
//! `raw-fetch` is `fetch` without async-nats: the same consumer and pull requests over one
//! raw TCP socket, each frame's control line parsed and its payload skipped (`raw.rs`), so
//! it shows what the server can give a reader that does nothing per message.
//! `raw-publish-fast` is its publishing counterpart (`raw_fast.rs`): one fast-ingest batch
//! written straight to a raw socket, its flow acks counted.
//!
//! Each prints one JSON line: `{"op":..,"msgs":..,"bytes":..,"seconds":..}`.

use jetstream_arrow_core::defaults;
use jetstream_arrow_core::defaults::MAX_BYTES_IN_FLIGHT;
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::header::NATS_MESSAGE_ID;
use async_nats::{Client, ConnectOptions, HeaderMap, Message, StatusCode, Subject};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};

mod raw;
mod raw_fast;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// How long a run may go without a single reply before it gives up.
const STALL: Duration = Duration::from_secs(30);

const USAGE: &str = "usage:
  native-baseline publish --url U --stream S --subject X --count N --size B [--window W] [--max-bytes-in-flight B] [--msg-ids 0/1]
  native-baseline fetch   --url U --stream S --count N [--batch K] [--max-bytes M]
  native-baseline flow    --url U --stream S --count N [--max-ack-pending P]
  native-baseline raw-fetch --url U --stream S --count N [--batch K] [--max-bytes M]
  native-baseline raw-publish-fast --url U --subject X --count N --size B [--window W]";

struct Args {
    op: String,
    flags: HashMap<String, String>,
}

impl Args {
    fn parse() -> Result<Self, Error> {
        let mut it = std::env::args().skip(1);
        let op = it.next().ok_or(USAGE)?;
        let mut flags = HashMap::new();
        while let Some(key) = it.next() {
            let name = key
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {key:?}\n{USAGE}"))?;
            let value = it
                .next()
                .ok_or_else(|| format!("--{name} needs a value\n{USAGE}"))?;
            flags.insert(name.to_string(), value);
        }
        Ok(Self { op, flags })
    }

    fn str(&self, name: &str) -> Result<String, Error> {
        self.flags
            .get(name)
            .cloned()
            .ok_or_else(|| format!("--{name} is required\n{USAGE}").into())
    }

    fn num(&self, name: &str, default: Option<u64>) -> Result<u64, Error> {
        match (self.flags.get(name), default) {
            (Some(v), _) => v
                .parse()
                .map_err(|_| format!("--{name} must be a whole number, got {v:?}").into()),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(format!("--{name} is required\n{USAGE}").into()),
        }
    }
}

async fn connect(url: &str) -> Result<Client, Error> {
    let client = ConnectOptions::new()
        .subscription_capacity(1 << 18)
        .client_capacity(1 << 14)
        .request_timeout(Some(Duration::from_secs(10)))
        .connection_timeout(Duration::from_secs(10))
        .connect(url)
        .await?;
    Ok(client)
}

/// What a publish reply says about the message it answers.
enum Reply {
    Stored,
    /// Backpressure (429) or no responders (503): the message was not stored; send it again.
    Retry,
    Failed(String),
}

fn classify(msg: &Message) -> Reply {
    if let Some(status) = msg.status {
        return if status == StatusCode::NO_RESPONDERS {
            Reply::Retry
        } else {
            Reply::Failed(format!(
                "status {status} {}",
                msg.description.as_deref().unwrap_or("")
            ))
        };
    }
    // A PubAck is `{"stream":..,"seq":..}`; only errors carry `"error"`, so the common case
    // costs one scan of a few dozen bytes and no JSON parse.
    let body = &msg.payload[..];
    if !body.windows(7).any(|w| w == b"\"error\"") {
        return Reply::Stored;
    }
    let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let err = &parsed["error"];
    if err["code"] == 429 || err["code"] == 503 || err["err_code"] == 10167 {
        Reply::Retry
    } else {
        Reply::Failed(String::from_utf8_lossy(body).into_owned())
    }
}

/// Core publish with a reply subject per message (`<inbox>.<index>`) on one wildcard
/// subscription, a bounded window of unacknowledged messages, and retries of 429/503 so
/// the count stored is exact.
async fn publish(args: &Args) -> Result<Value, Error> {
    let url = args.str("url")?;
    let subject = Subject::from(args.str("subject")?);
    let _stream = args.str("stream")?;
    let count = args.num("count", None)?;
    let size = args.num("size", None)? as usize;
    // The same two bounds as the package's publisher, taken from it: at most `window`
    // messages and at most MAX_BYTES_IN_FLIGHT payload bytes in flight (with large
    // messages the count alone would let window x size pile up in the server).
    let max_bytes_in_flight = args.num("max-bytes-in-flight", Some(MAX_BYTES_IN_FLIGHT as u64))?;
    let window = args
        .num("window", Some(defaults::WINDOW as u64))?
        .min(max_bytes_in_flight / (size as u64).max(1))
        .max(1);
    // With --msg-ids 1 every message carries `Nats-Msg-Id: <index>`, as idempotent
    // writers (the Spark writer, the loader) send them: the server then also checks
    // and records each id in the stream's duplicate window, which costs it CPU.
    let msg_ids = args.num("msg-ids", Some(0))? != 0;

    let client = connect(&url).await?;
    let inbox = client.new_inbox();
    let mut acks = client.subscribe(format!("{inbox}.*")).await?;
    client.flush().await?;
    let payload = Bytes::from(vec![b'x'; size]);

    // Two tasks: this one publishes while a window permit is free; the ack task returns a
    // permit per reply and hands back what must be sent again. They run on both cores.
    let permits = Arc::new(Semaphore::new(window as usize));
    let (retry_tx, mut retry_rx) = mpsc::unbounded_channel::<u64>();
    let ack_permits = permits.clone();
    let acker = tokio::spawn(async move {
        let mut stored: u64 = 0;
        let mut retries: u64 = 0;
        while stored < count {
            let msg = tokio::time::timeout(STALL, acks.next())
                .await
                .map_err(|_| format!("no publish ack for {STALL:?} ({stored} of {count} stored)"))?
                .ok_or("ack subscription closed")?;
            match classify(&msg) {
                Reply::Stored => stored += 1,
                Reply::Retry => {
                    retries += 1;
                    let token = msg.subject.rsplit('.').next().unwrap_or_default();
                    let index = token.parse().map_err(|_| "bad ack reply subject")?;
                    retry_tx.send(index).map_err(|_| "publisher gone")?;
                }
                Reply::Failed(why) => return Err(format!("publish failed: {why}")),
            }
            ack_permits.add_permits(1);
        }
        // Dropping retry_tx tells the publisher that everything is stored.
        Ok::<_, String>((stored, retries))
    });

    let started = Instant::now();
    let mut next: u64 = 0;
    loop {
        let index = match retry_rx.try_recv() {
            Ok(i) => i,
            Err(_) if next < count => {
                next += 1;
                next - 1
            }
            Err(_) => match retry_rx.recv().await {
                Some(i) => i,
                None => break,
            },
        };
        permits.acquire().await?.forget();
        let reply = format!("{inbox}.{index}");
        if msg_ids {
            let mut headers = HeaderMap::new();
            headers.insert(NATS_MESSAGE_ID, index.to_string().as_str());
            client
                .publish_with_reply_and_headers(subject.clone(), reply, headers, payload.clone())
                .await?;
        } else {
            client
                .publish_with_reply(subject.clone(), reply, payload.clone())
                .await?;
        }
    }
    let (stored, retries) = acker.await??;
    let seconds = started.elapsed().as_secs_f64();
    Ok(json!({
        "op": "publish",
        "msgs": stored,
        "bytes": stored * size as u64,
        "seconds": seconds,
        "retries": retries,
        "window": window,
    }))
}

async fn api(client: &Client, subject: String, body: Value) -> Result<Value, Error> {
    let reply = client
        .request(subject.clone(), Bytes::from(body.to_string()))
        .await?;
    let value: Value = serde_json::from_slice(&reply.payload)?;
    if value.get("error").is_some() {
        return Err(format!("{subject}: {}", value["error"]).into());
    }
    Ok(value)
}

/// A pull consumer with AckNone, fed by `CONSUMER.MSG.NEXT` requests of `batch` messages
/// with a second request always outstanding so the server never waits for the client.
async fn fetch(args: &Args) -> Result<Value, Error> {
    let url = args.str("url")?;
    let stream = args.str("stream")?;
    let count = args.num("count", None)?;
    let batch = args.num("batch", Some(10_000))?.max(1);
    // Large enough that the message count, not the byte budget, ends each request.
    let max_bytes = args.num("max-bytes", Some(1 << 30))?;

    let client = connect(&url).await?;
    let consumer = format!(
        "nb_{}",
        client.new_inbox().rsplit('.').next().unwrap_or("c")
    );
    api(
        &client,
        format!("$JS.API.CONSUMER.CREATE.{stream}.{consumer}"),
        json!({
            "stream_name": stream,
            "config": {
                "name": consumer,
                "ack_policy": "none",
                "deliver_policy": "all",
                "inactive_threshold": 60_000_000_000u64,
                "mem_storage": true,
            },
        }),
    )
    .await?;

    let inbox = client.new_inbox();
    let mut msgs = client.subscribe(inbox.clone()).await?;
    client.flush().await?;
    let next_subject = format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}");
    let request = Bytes::from(
        json!({"batch": batch, "max_bytes": max_bytes, "expires": 5_000_000_000u64}).to_string(),
    );

    let mut received: u64 = 0;
    let mut bytes: u64 = 0;
    let mut requested: u64 = 0;
    let mut ended_early: u64 = 0;
    // Messages still owed by the oldest outstanding request.
    let mut owed_by_oldest = batch;
    let started = Instant::now();
    for _ in 0..2 {
        client
            .publish_with_reply(next_subject.clone(), inbox.clone(), request.clone())
            .await?;
        requested += batch;
    }
    while received < count {
        let msg = tokio::time::timeout(STALL, msgs.next())
            .await
            .map_err(|_| format!("no message for {STALL:?} ({received} of {count})"))?
            .ok_or("subscription closed")?;
        let request_done = match msg.status {
            None => {
                received += 1;
                bytes += msg.payload.len() as u64;
                owed_by_oldest -= 1;
                owed_by_oldest == 0
            }
            Some(StatusCode::IDLE_HEARTBEAT) => false,
            // Sent after the last message of a request that had `max_bytes`; that request was
            // already retired when its last message arrived.
            Some(StatusCode::REQUEST_TERMINATED)
                if msg.description.as_deref() == Some("Batch Completed") =>
            {
                false
            }
            // 408 expired, 409 ended early: the oldest request is over either way.
            Some(StatusCode::TIMEOUT) | Some(StatusCode::REQUEST_TERMINATED) => {
                ended_early += 1;
                true
            }
            Some(status) => {
                return Err(format!(
                    "pull request failed: {status} {}",
                    msg.description.as_deref().unwrap_or("")
                )
                .into())
            }
        };
        if request_done {
            owed_by_oldest = batch;
            if received < count {
                client
                    .publish_with_reply(next_subject.clone(), inbox.clone(), request.clone())
                    .await?;
                requested += batch;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    // Best effort: the consumer is ephemeral and goes away on its own anyway.
    let _ = api(
        &client,
        format!("$JS.API.CONSUMER.DELETE.{stream}.{consumer}"),
        json!({}),
    )
    .await;
    Ok(json!({
        "op": "fetch",
        "msgs": received,
        "bytes": bytes,
        "seconds": seconds,
        "batch": batch,
        "requested": requested,
        "ended_early": ended_early,
    }))
}

/// A durable push consumer with `ack_policy: flow_control`, each flow-control request
/// (and stalled heartbeat) answered at once with the last message received: what
/// flow-control consumption costs the server, with nothing in between.
async fn flow(args: &Args) -> Result<Value, Error> {
    let url = args.str("url")?;
    let stream = args.str("stream")?;
    let count = args.num("count", None)?;
    let max_ack_pending = args.num("max-ack-pending", Some(65_536))?;

    let client = connect(&url).await?;
    let consumer = format!(
        "nbfc_{}",
        client.new_inbox().rsplit('.').next().unwrap_or("c")
    );
    let deliver = client.new_inbox();
    let mut msgs = client.subscribe(deliver.clone()).await?;
    client.flush().await?;
    api(
        &client,
        format!("$JS.API.CONSUMER.CREATE.{stream}.{consumer}"),
        json!({
            "stream_name": stream,
            "config": {
                "durable_name": consumer,
                "deliver_subject": deliver,
                "ack_policy": "flow_control",
                "flow_control": true,
                "idle_heartbeat": 1_000_000_000u64,
                "max_ack_pending": max_ack_pending,
                "deliver_policy": "all",
            },
        }),
    )
    .await?;

    let mut received: u64 = 0;
    let mut bytes: u64 = 0;
    let mut answers: u64 = 0;
    let mut last = (0u64, 0u64);
    let started = Instant::now();
    while received < count {
        let msg = tokio::time::timeout(STALL, msgs.next())
            .await
            .map_err(|_| format!("no message for {STALL:?} ({received} of {count})"))?
            .ok_or("subscription closed")?;
        let answer_to = match msg.status {
            None => {
                let meta = msg
                    .reply
                    .as_deref()
                    .and_then(jetstream_arrow_core::arrow::metadata::parse_ack_subject)
                    .ok_or("a delivery without an ack subject")?;
                last = (meta.consumer_seq, meta.stream_seq);
                received += 1;
                bytes += msg.payload.len() as u64;
                None
            }
            Some(StatusCode::IDLE_HEARTBEAT) => msg.reply.clone().or_else(|| {
                msg.headers
                    .as_ref()
                    .and_then(|h| h.get("Nats-Consumer-Stalled"))
                    .map(|v| Subject::from(v.as_str()))
            }),
            Some(status) => return Err(format!("unexpected status {status}").into()),
        };
        if let Some(subject) = answer_to.filter(|s| !s.is_empty()) {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Last-Consumer", last.0.to_string().as_str());
            headers.insert("Nats-Last-Stream", last.1.to_string().as_str());
            client
                .publish_with_headers(subject, headers, Bytes::new())
                .await?;
            answers += 1;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let _ = api(
        &client,
        format!("$JS.API.CONSUMER.DELETE.{stream}.{consumer}"),
        json!({}),
    )
    .await;
    Ok(json!({
        "op": "flow",
        "msgs": received,
        "bytes": bytes,
        "seconds": seconds,
        "ack_messages_per_1000": answers as f64 * 1000.0 / received.max(1) as f64,
    }))
}

async fn run() -> Result<Value, Error> {
    let args = Args::parse()?;
    match args.op.as_str() {
        "publish" => publish(&args).await,
        "fetch" => fetch(&args).await,
        "flow" => flow(&args).await,
        // Blocking on purpose: one socket read by this thread alone, no runtime in between.
        "raw-fetch" => raw::fetch(&args),
        "raw-publish-fast" => raw_fast::publish_fast(&args),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            std::process::exit(0);
        }
        other => Err(format!("unknown subcommand {other:?}\n{USAGE}").into()),
    }
}

/// This process's peak resident memory in MB (10^6 bytes), from `VmHWM` in /proc.
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0 / 1e6)
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(mut line) => {
            if let Some(mb) = peak_rss_mb() {
                line["rss_peak_mb"] = json!((mb * 10.0).round() / 10.0);
            }
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("native-baseline: {err}");
            ExitCode::FAILURE
        }
    }
}
