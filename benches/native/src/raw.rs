//! The honest read limit: a JetStream pull consumer read over one raw TCP socket, the
//! NATS protocol spoken by hand. The async-nats `fetch` reads about as fast as the
//! package does, so it cannot show what the server could give; this client does next to
//! nothing per message: it reads the socket into one buffer, parses each frame's control
//! line by scanning bytes, and skips the payload without copying or allocating.
//!
//! The consumer and the pull requests are the `fetch` op's (AckNone, `deliver_policy`
//! all, memory storage, `batch`/`max_bytes`/`expires`, two requests outstanding), so the
//! two differ only in the client.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::{Args, Error, STALL};

/// The one read buffer: large, so a read takes whatever the socket holds in one call.
const BUFFER: usize = 4 << 20;
/// Below this much free room at its end, the buffer's unparsed tail moves to the front
/// before the next read (the tail is at most a partial control line or status header).
const MIN_READ: usize = 64 << 10;
/// Longest control line, status header or API reply accepted (the server's are far
/// shorter; a longer one means the stream of frames is out of step).
const MAX_FRAME_HEAD: usize = 64 << 10;
/// How often a blocked read wakes up to look at the stall clock.
const POLL: Duration = Duration::from_millis(500);
/// `NATS/1.0 ` and a three-digit code: enough of a header to tell a status from data.
const STATUS_PEEK: usize = 12;
const SID_API: u64 = 1;
const SID_DELIVERY: u64 = 2;
const CONNECT: &[u8] = b"CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\
\"no_responders\":true,\"protocol\":1}\r\nPING\r\n";

/// Why the connection gave no frame.
pub(crate) enum Stop {
    Stalled,
    Closed,
    Io(std::io::Error),
    Protocol(String),
}

impl Stop {
    /// The error to report, saying what the client was waiting for when it stopped.
    pub(crate) fn waiting_for(self, what: impl FnOnce() -> String) -> Error {
        match self {
            Stop::Stalled => format!("no progress for {STALL:?} while waiting for {}", what()),
            Stop::Closed => format!(
                "the server closed the connection while waiting for {}",
                what()
            ),
            Stop::Io(e) => format!("{e} while waiting for {}", what()),
            Stop::Protocol(why) => format!("{why} (while waiting for {})", what()),
        }
        .into()
    }
}

impl From<std::io::Error> for Stop {
    fn from(e: std::io::Error) -> Self {
        Stop::Io(e)
    }
}

/// The control line of a `MSG` or `HMSG`; its header and payload (and CRLF) follow
/// unread in the buffer.
pub(crate) struct Msg {
    pub(crate) sid: u64,
    /// Header bytes (0 for `MSG`), counted in `total`.
    pub(crate) hdr: usize,
    pub(crate) total: usize,
}

pub(crate) enum Frame {
    Msg(Msg),
    Pong,
}

/// One blocking socket and the one buffer it is read into: `buf[start..end]` is read but
/// not yet parsed.
pub(crate) struct Conn {
    pub(crate) sock: TcpStream,
    pub(crate) buf: Vec<u8>,
    pub(crate) start: usize,
    end: usize,
    /// Bumped by the caller whenever what it waits for arrives (a counter, so no clock is
    /// read per message); the reads give up once it stays unchanged for STALL.
    pub(crate) progress: u64,
    seen: u64,
    since: Instant,
}

impl Conn {
    fn open(url: &str) -> Result<Self, Error> {
        let rest = match url.split_once("://") {
            Some(("nats", rest)) => rest,
            Some((scheme, _)) => {
                return Err(format!("the raw clients speak plain nats://, not {scheme}://").into())
            }
            None => url,
        };
        let host = rest.split(',').next().unwrap_or(rest).trim_end_matches('/');
        if host.contains('@') {
            return Err(
                "the raw clients do not authenticate; give a URL without credentials".into(),
            );
        }
        let has_port = host
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.parse::<u16>().is_ok());
        let addr = if has_port {
            host.to_string()
        } else {
            format!("{host}:4222")
        };
        let mut last = None;
        for sa in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&sa, Duration::from_secs(10)) {
                Ok(sock) => {
                    sock.set_nodelay(true)?;
                    sock.set_read_timeout(Some(POLL))?;
                    sock.set_write_timeout(Some(STALL))?;
                    return Ok(Self {
                        sock,
                        buf: vec![0; BUFFER],
                        start: 0,
                        end: 0,
                        progress: 0,
                        seen: 0,
                        since: Instant::now(),
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(format!(
            "cannot connect to {addr}: {}",
            last.map_or("no address".into(), |e| e.to_string())
        )
        .into())
    }

    /// [`Self::open`], then the handshake: the server's INFO read and checked, CONNECT
    /// sent and its PONG awaited.
    pub(crate) fn connect(url: &str) -> Result<Self, Error> {
        let mut conn = Conn::open(url)?;
        let (a, b) = conn
            .line()
            .map_err(|s| s.waiting_for(|| "the server's INFO".into()))?;
        let info: Value = match conn.buf[a..b].strip_prefix(b"INFO ") {
            Some(json) => serde_json::from_slice(json)?,
            None => {
                return Err(bad_line(&conn.buf[a..b]).waiting_for(|| "the server's INFO".into()))
            }
        };
        if info["headers"] != true {
            return Err(
                "the server does not support headers (needed for JetStream statuses)".into(),
            );
        }
        if info["auth_required"] == true {
            return Err(
                "the server requires authentication, which the raw clients do not do".into(),
            );
        }
        conn.send(CONNECT)
            .map_err(|s| s.waiting_for(|| "the PONG after CONNECT".into()))?;
        loop {
            match conn.frame() {
                Ok(Frame::Pong) => break,
                Ok(Frame::Msg(m)) => conn
                    .skip(m.total + 2)
                    .map_err(|s| s.waiting_for(|| "the PONG after CONNECT".into()))?,
                Err(s) => return Err(s.waiting_for(|| "the PONG after CONNECT".into())),
            }
        }
        Ok(conn)
    }

    /// Starts the stall clock again: a new wait begins.
    pub(crate) fn restart_clock(&mut self) {
        self.seen = self.progress;
        self.since = Instant::now();
    }

    pub(crate) fn send(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        Ok(self.sock.write_all(bytes)?)
    }

    /// One read of whatever the socket holds into the free end of the buffer (moving the
    /// unparsed tail to the front first when little room is left), waiting at most STALL
    /// without progress.
    fn fill(&mut self) -> Result<(), Stop> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buf.len() - self.end < MIN_READ {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            return Err(Stop::Protocol("a frame larger than the read buffer".into()));
        }
        loop {
            let got = match self.sock.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(Stop::Closed),
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => 0,
                Err(e) if e.kind() == ErrorKind::Interrupted => 0,
                Err(e) => return Err(e.into()),
            };
            self.end += got;
            if self.progress != self.seen {
                self.seen = self.progress;
                self.since = Instant::now();
            } else if self.since.elapsed() > STALL {
                return Err(Stop::Stalled);
            }
            if got > 0 {
                return Ok(());
            }
        }
    }

    /// One read of what the socket holds (for a caller that knows something is there).
    pub(crate) fn fill_once(&mut self) -> Result<(), Stop> {
        self.fill()
    }

    /// Whether a whole line is in the buffer, unparsed.
    pub(crate) fn has_line(&self) -> bool {
        self.buf[self.start..self.end].contains(&b'\n')
    }

    /// Until at least `n` unparsed bytes are in the buffer.
    pub(crate) fn need(&mut self, n: usize) -> Result<(), Stop> {
        while self.end - self.start < n {
            self.fill()?;
        }
        Ok(())
    }

    /// Past `n` bytes, read or not: what is not in the buffer yet is read and dropped.
    pub(crate) fn skip(&mut self, mut n: usize) -> Result<(), Stop> {
        loop {
            let have = self.end - self.start;
            if n <= have {
                self.start += n;
                return Ok(());
            }
            n -= have;
            self.start = self.end;
            self.fill()?;
        }
    }

    /// The next line without its CRLF, as a range of the buffer; parsing goes on after it.
    fn line(&mut self) -> Result<(usize, usize), Stop> {
        let mut scanned = 0;
        loop {
            let from = self.start + scanned;
            if let Some(i) = self.buf[from..self.end].iter().position(|&b| b == b'\n') {
                let (a, nl) = (self.start, from + i);
                self.start = nl + 1;
                let b = if nl > a && self.buf[nl - 1] == b'\r' {
                    nl - 1
                } else {
                    nl
                };
                return Ok((a, b));
            }
            scanned = self.end - self.start;
            if scanned > MAX_FRAME_HEAD {
                return Err(Stop::Protocol("a control line without an end".into()));
            }
            self.fill()?;
        }
    }

    /// The next message or PONG; PINGs are answered, `+OK` and INFO updates passed over,
    /// `-ERR` is an error.
    pub(crate) fn frame(&mut self) -> Result<Frame, Stop> {
        loop {
            let (a, b) = self.line()?;
            if let Some(frame) = self.parse_line(a, b)? {
                return Ok(frame);
            }
        }
    }

    /// [`Self::frame`] from what is already read, without waiting: None once no whole
    /// line is left (a PING among the lines is answered and passed over, so a caller
    /// never blocks for a frame the server is not going to send).
    pub(crate) fn frame_ready(&mut self) -> Result<Option<Frame>, Stop> {
        while self.has_line() {
            let (a, b) = self.line()?;
            if let Some(frame) = self.parse_line(a, b)? {
                return Ok(Some(frame));
            }
        }
        Ok(None)
    }

    /// One control line: a frame, or None for one handled here (PING, `+OK`, INFO).
    fn parse_line(&mut self, a: usize, b: usize) -> Result<Option<Frame>, Stop> {
        let line = &self.buf[a..b];
        if let Some(rest) = line.strip_prefix(b"MSG ") {
            return parse_msg(rest, false)
                .map(|m| Some(Frame::Msg(m)))
                .ok_or_else(|| bad_line(line));
        }
        if let Some(rest) = line.strip_prefix(b"HMSG ") {
            return parse_msg(rest, true)
                .map(|m| Some(Frame::Msg(m)))
                .ok_or_else(|| bad_line(line));
        }
        match line {
            b"PING" => self.send(b"PONG\r\n")?,
            b"PONG" => return Ok(Some(Frame::Pong)),
            b"+OK" | b"" => {}
            _ if line.starts_with(b"INFO ") => {}
            _ if line.starts_with(b"-ERR") => {
                return Err(Stop::Protocol(format!(
                    "server: {}",
                    String::from_utf8_lossy(line)
                )))
            }
            _ => return Err(bad_line(line)),
        }
        Ok(None)
    }

    /// The status code of a message with headers (`NATS/1.0 408 ...`), or None for data
    /// (`NATS/1.0\r\n...`). Reads only the first bytes of the header.
    pub(crate) fn status(&mut self, m: &Msg) -> Result<Option<u16>, Stop> {
        if m.hdr < STATUS_PEEK {
            return Ok(None);
        }
        self.need(STATUS_PEEK)?;
        let head = &self.buf[self.start..self.start + STATUS_PEEK];
        if head[8] != b' ' {
            return Ok(None);
        }
        Ok(number(&head[9..12]).map(|c| c as u16))
    }

    /// A status message's description (`Batch Completed` in `NATS/1.0 409 Batch Completed`).
    pub(crate) fn status_text(&mut self, m: &Msg) -> Result<&[u8], Stop> {
        if m.hdr > MAX_FRAME_HEAD {
            return Err(Stop::Protocol(format!(
                "a status header of {} bytes",
                m.hdr
            )));
        }
        self.need(m.hdr)?;
        let header = &self.buf[self.start + STATUS_PEEK..self.start + m.hdr];
        let first = header.split(|&b| b == b'\r').next().unwrap_or_default();
        Ok(first.trim_ascii())
    }

    /// A JetStream API request over this connection: published with the API inbox as its
    /// reply subject, the reply read (deliveries on the way are skipped) and parsed.
    fn api(&mut self, subject: &str, reply_to: &str, body: &Value) -> Result<Value, Error> {
        let body = body.to_string();
        let what = || format!("the reply to {subject}");
        self.restart_clock();
        let frame = format!("PUB {subject} {reply_to} {}\r\n{body}\r\n", body.len());
        self.send(frame.as_bytes())
            .map_err(|s| s.waiting_for(what))?;
        loop {
            let Frame::Msg(m) = self.frame().map_err(|s| s.waiting_for(what))? else {
                continue;
            };
            if m.sid != SID_API {
                self.skip(m.total + 2).map_err(|s| s.waiting_for(what))?;
                continue;
            }
            if let Some(code) = self.status(&m).map_err(|s| s.waiting_for(what))? {
                return Err(if code == 503 {
                    format!("{subject}: no responders (is JetStream enabled?)").into()
                } else {
                    format!("{subject}: status {code}").into()
                });
            }
            if m.total > MAX_FRAME_HEAD {
                return Err(format!("{subject}: a reply of {} bytes", m.total).into());
            }
            self.need(m.total + 2).map_err(|s| s.waiting_for(what))?;
            let payload = &self.buf[self.start + m.hdr..self.start + m.total];
            let value: Value = serde_json::from_slice(payload)?;
            self.skip(m.total + 2).map_err(|s| s.waiting_for(what))?;
            if value.get("error").is_some() {
                return Err(format!("{subject}: {}", value["error"]).into());
            }
            return Ok(value);
        }
    }
}

fn bad_line(line: &[u8]) -> Stop {
    let shown = &line[..line.len().min(200)];
    Stop::Protocol(format!(
        "unexpected protocol line {:?}",
        String::from_utf8_lossy(shown)
    ))
}

/// A decimal number of ASCII digits, by hand (no UTF-8 check, no allocation).
fn number(s: &[u8]) -> Option<usize> {
    if s.is_empty() || s.len() > 18 {
        return None;
    }
    s.iter().try_fold(0usize, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + usize::from(b - b'0'))
    })
}

/// `<subject> <sid> [reply-to] <#bytes>` (MSG) or `<subject> <sid> [reply-to] <#header
/// bytes> <#total bytes>` (HMSG): split on spaces into a fixed array, nothing allocated.
fn parse_msg(rest: &[u8], headers: bool) -> Option<Msg> {
    let mut tokens: [&[u8]; 5] = [&[]; 5];
    let mut n = 0;
    for token in rest
        .split(|&b| b == b' ' || b == b'\t')
        .filter(|t| !t.is_empty())
    {
        *tokens.get_mut(n)? = token;
        n += 1;
    }
    let sid = number(tokens.get(1)?)? as u64;
    let (hdr, total) = match (headers, n) {
        (false, 3 | 4) => (0, number(tokens[n - 1])?),
        (true, 4 | 5) => (number(tokens[n - 2])?, number(tokens[n - 1])?),
        _ => return None,
    };
    (hdr <= total).then_some(Msg { sid, hdr, total })
}

/// `raw-fetch`: the `fetch` op's consumer and pull requests over a raw socket.
pub fn fetch(args: &Args) -> Result<Value, Error> {
    let url = args.str("url")?;
    let stream = args.str("stream")?;
    let count = args.num("count", None)?;
    let batch = args.num("batch", Some(10_000))?.max(1);
    // Large enough that the message count, not the byte budget, ends each request.
    let max_bytes = args.num("max-bytes", Some(1 << 30))?;

    let mut conn = Conn::connect(&url)?;

    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let token = format!("{:x}{:x}", std::process::id(), nanos);
    let api_inbox = format!("_INBOX.{token}.api");
    let deliver = format!("_INBOX.{token}.msgs");
    let consumer = format!("nbraw_{token}");
    let subs = format!("SUB {api_inbox} {SID_API}\r\nSUB {deliver} {SID_DELIVERY}\r\n");
    conn.send(subs.as_bytes())
        .map_err(|s| s.waiting_for(|| "the subscriptions".into()))?;
    conn.api(
        &format!("$JS.API.CONSUMER.CREATE.{stream}.{consumer}"),
        &api_inbox,
        &json!({
            "stream_name": stream,
            "config": {
                "name": consumer,
                "ack_policy": "none",
                "deliver_policy": "all",
                "inactive_threshold": 60_000_000_000u64,
                "mem_storage": true,
            },
        }),
    )?;

    let request =
        json!({"batch": batch, "max_bytes": max_bytes, "expires": 5_000_000_000u64}).to_string();
    let pull = format!(
        "PUB $JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer} {deliver} {}\r\n{request}\r\n",
        request.len()
    )
    .into_bytes();

    let mut tally = Tally::default();
    let started = Instant::now();
    pull_until(&mut conn, &pull, count, batch, &mut tally).map_err(|s| {
        s.waiting_for(|| {
            format!(
                "deliveries to {consumer} ({} of {count} received, {} requested)",
                tally.received, tally.requested
            )
        })
    })?;
    let seconds = started.elapsed().as_secs_f64();
    // Best effort: the consumer is ephemeral and goes away on its own anyway.
    let _ = conn.api(
        &format!("$JS.API.CONSUMER.DELETE.{stream}.{consumer}"),
        &api_inbox,
        &json!({}),
    );
    Ok(json!({
        "op": "raw-fetch",
        "msgs": tally.received,
        "bytes": tally.bytes,
        "seconds": seconds,
        "batch": batch,
        "requested": tally.requested,
        "ended_early": tally.ended_early,
    }))
}

#[derive(Default)]
struct Tally {
    received: u64,
    bytes: u64,
    requested: u64,
    ended_early: u64,
}

/// Two pull requests outstanding, a new one sent as the oldest ends, until `count` data
/// messages have arrived; statuses are told apart from data by their header's first bytes.
///
/// As in `fetch`, a request counts as done after `batch` data messages. The server serves
/// its waiting requests in turn, so those are not all the oldest request's: what this
/// keeps exact is the room requested, between one and two batches ahead of the reader.
fn pull_until(
    conn: &mut Conn,
    pull: &[u8],
    count: u64,
    batch: u64,
    t: &mut Tally,
) -> Result<(), Stop> {
    // Messages still owed by the oldest outstanding request.
    let mut owed_by_oldest = batch;
    conn.restart_clock();
    for _ in 0..2 {
        conn.send(pull)?;
        t.requested += batch;
    }
    while t.received < count {
        let Frame::Msg(m) = conn.frame()? else {
            continue;
        };
        if m.sid != SID_DELIVERY {
            conn.skip(m.total + 2)?;
            continue;
        }
        let request_done = match conn.status(&m)? {
            None => {
                t.received += 1;
                t.bytes += (m.total - m.hdr) as u64;
                conn.progress += 1;
                owed_by_oldest -= 1;
                owed_by_oldest == 0
            }
            Some(100) => false,
            // Ends a request that had `max_bytes` once its last message is out; the pull
            // that replaces it goes per `batch` data messages, so it is not counted twice.
            Some(409) if conn.status_text(&m)? == b"Batch Completed" => false,
            // 408 expired, 409 ended early: the oldest request is over either way.
            Some(408 | 409) => {
                t.ended_early += 1;
                true
            }
            Some(code) => {
                let text = String::from_utf8_lossy(conn.status_text(&m)?).into_owned();
                return Err(Stop::Protocol(format!(
                    "pull request failed: {code} {text}"
                )));
            }
        };
        conn.skip(m.total + 2)?;
        if request_done {
            owed_by_oldest = batch;
            if t.received < count {
                conn.send(pull)?;
                t.requested += batch;
            }
        }
    }
    Ok(())
}
