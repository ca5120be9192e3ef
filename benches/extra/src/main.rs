//! jetstream-extra (orbit.rs) as a peer: its fast-ingest `FastPublisher`, its atomic
//! `BatchPublish` and its batched direct get (`get_batch`), driven the way their docs
//! show, with the messages, counts and streams of the package's own bench cases.
//!
//! ```text
//! extra-peers publish-fast   --url U --subject X --count N --size B [--window W]
//! extra-peers publish-atomic --url U --subject X --count N --size B
//! extra-peers get-batch      --url U --stream S --count N
//! ```
//!
//! `publish-fast` sends one batch with the package's flow bounds (at most 500 messages
//! per ack, two acks outstanding, within the window and 32 MiB in flight). `publish-atomic`
//! sends batches of 1,000 (the server's limit and the package's `batch_rows`), each
//! committed with its last message; the library refuses `Nats-Msg-Id` in a batch, so it
//! has none. `get-batch` reads the stream from sequence 1 in requests of 1,000 (the
//! library's limit), two requests in flight.
//!
//! Each prints one JSON line: `{"op":..,"msgs":..,"bytes":..,"seconds":..}`, as the
//! native baseline does.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, Context};
use bytes::Bytes;
use futures::StreamExt;
use jetstream_extra::batch_fetch::BatchFetchExt;
use jetstream_extra::batch_publish::BatchPublishExt;
use jetstream_extra::batch_publish_fast::{FastPublishExt, GapMode};
use serde_json::{json, Value};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The package's bounds (`defaults::FAST_FLOW`, `FAST_OUTSTANDING_ACKS`,
/// `defaults::MAX_BYTES_IN_FLIGHT`, `ATOMIC_BATCH_ROWS`); this crate cannot depend on the
/// package's core (another async-nats), so they are restated here.
const FAST_FLOW: u64 = 500;
const FAST_OUTSTANDING_ACKS: u64 = 2;
const MAX_BYTES_IN_FLIGHT: u64 = 32 << 20;
const ATOMIC_BATCH_ROWS: u64 = 1_000;
/// jetstream-extra's most messages per `get_batch` request.
const GET_BATCH: u64 = 1_000;
const TIMEOUT: Duration = Duration::from_secs(30);

const USAGE: &str = "usage:
  extra-peers publish-fast   --url U --subject X --count N --size B [--window W]
  extra-peers publish-atomic --url U --subject X --count N --size B
  extra-peers get-batch      --url U --stream S --count N";

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

async fn connect(url: &str) -> Result<Context, Error> {
    let client = async_nats::ConnectOptions::new()
        .subscription_capacity(1 << 18)
        .client_capacity(1 << 14)
        .request_timeout(Some(Duration::from_secs(10)))
        .connection_timeout(Duration::from_secs(10))
        .connect(url)
        .await?;
    let mut js = jetstream::new(client);
    js.set_timeout(TIMEOUT);
    Ok(js)
}

/// The package's flow for these bounds (`publish/fast.rs`, `requested_flow`).
fn requested_flow(window: u64, size: u64) -> u16 {
    let by_window = window / FAST_OUTSTANDING_ACKS;
    let by_bytes = (MAX_BYTES_IN_FLIGHT / (FAST_OUTSTANDING_ACKS * size.max(1))).saturating_sub(1);
    FAST_FLOW.min(by_window).min(by_bytes).max(1) as u16
}

/// One `FastPublisher` batch of `count` messages, closed with an end-of-batch message.
async fn publish_fast(args: &Args) -> Result<Value, Error> {
    let subject = async_nats::Subject::from(args.str("subject")?);
    let count = args.num("count", None)?;
    let size = args.num("size", None)?;
    let window = args.num("window", Some(8192))?.max(1);
    let flow = requested_flow(window, size);
    let js = connect(&args.str("url")?).await?;
    let payload = Bytes::from(vec![b'x'; size as usize]);

    let started = Instant::now();
    let mut batch = js
        .fast_publish()
        .flow(flow)
        .max_outstanding_acks(FAST_OUTSTANDING_ACKS as u16)
        .gap_mode(GapMode::Fail)
        .ack_timeout(TIMEOUT)
        .build()?;
    for _ in 0..count {
        batch.add(subject.clone(), payload.clone()).await?;
    }
    let ack = batch.close().await?;
    let seconds = started.elapsed().as_secs_f64();
    if ack.batch_size != count {
        return Err(format!(
            "the batch's PubAck says {} of {count} stored",
            ack.batch_size
        )
        .into());
    }
    Ok(json!({
        "op": "publish-fast",
        "msgs": ack.batch_size,
        "bytes": ack.batch_size * size,
        "seconds": seconds,
        "flow": flow,
    }))
}

/// Atomic batches of [`ATOMIC_BATCH_ROWS`], one after the other, each committed with its
/// last message (the library's defaults: no acks before the commit).
async fn publish_atomic(args: &Args) -> Result<Value, Error> {
    let subject = async_nats::Subject::from(args.str("subject")?);
    let count = args.num("count", None)?;
    let size = args.num("size", None)?;
    let js = connect(&args.str("url")?).await?;
    let payload = Bytes::from(vec![b'x'; size as usize]);

    let started = Instant::now();
    let mut stored = 0;
    let mut batches = 0;
    while stored < count {
        let n = ATOMIC_BATCH_ROWS.min(count - stored);
        let mut batch = js.batch_publish().timeout(TIMEOUT).build();
        for _ in 1..n {
            batch.add(subject.clone(), payload.clone()).await?;
        }
        let ack = batch.commit(subject.clone(), payload.clone()).await?;
        if ack.batch_size != n {
            return Err(format!("an atomic batch of {n} stored {}", ack.batch_size).into());
        }
        stored += n;
        batches += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(json!({
        "op": "publish-atomic",
        "msgs": stored,
        "bytes": stored * size,
        "seconds": seconds,
        "batches": batches,
    }))
}

/// The stream from sequence 1 by `get_batch` requests of [`GET_BATCH`], the next request
/// sent before the current one is read (the stream has no gaps, so where it starts is
/// known), until `count` messages.
async fn get_batch(args: &Args) -> Result<Value, Error> {
    let stream = args.str("stream")?;
    let count = args.num("count", None)?;
    let js = connect(&args.str("url")?).await?;

    let request = |seq: u64| {
        let js = js.clone();
        let stream = stream.clone();
        let batch = GET_BATCH.min(count + 1 - seq) as usize;
        async move { js.get_batch(&stream, batch).sequence(seq).send().await }
    };
    let started = Instant::now();
    let mut received: u64 = 0;
    let mut bytes: u64 = 0;
    let mut requests: u64 = 1;
    let mut current = request(1).await?;
    let mut next_seq = 1 + GET_BATCH;
    while received < count {
        let next = if next_seq <= count {
            requests += 1;
            Some(request(next_seq).await?)
        } else {
            None
        };
        next_seq += GET_BATCH;
        let before = received;
        while let Some(msg) = current.next().await {
            let msg = msg?;
            received += 1;
            bytes += msg.payload.len() as u64;
        }
        if received - before == 0 {
            return Err(format!("a batch ended empty after {received} of {count}").into());
        }
        match next {
            Some(n) => current = n,
            None => break,
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(json!({
        "op": "get-batch",
        "msgs": received,
        "bytes": bytes,
        "seconds": seconds,
        "requests": requests,
    }))
}

async fn run() -> Result<Value, Error> {
    let args = Args::parse()?;
    match args.op.as_str() {
        "publish-fast" => publish_fast(&args).await,
        "publish-atomic" => publish_atomic(&args).await,
        "get-batch" => get_batch(&args).await,
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
            eprintln!("extra-peers: {err}");
            ExitCode::FAILURE
        }
    }
}
